//! The EndpointSliceList in pages, as kubectl and client-go's pager ask for it: the first
//! page with `limit` ([`PAGE_SIZE`]), each next one with the `metadata.continue` token of
//! the page before, until a page has none. A 410 answer to a token whose `Status` has
//! reason `Expired` (the token outlived the server's history) starts the list over
//! once from its first page; a second is a fault like any answer other than 200. A 404
//! for the first page means the server has no EndpointSlice API, which the caller answers
//! from the core v1 Endpoints. A server that loops (a token that comes back, or more than
//! [`MAX_PAGES`] pages) is a `bad_response` fault, never a hang.
//!
//! The walk asks through a closure (the status and body of the page a token names), so
//! it knows nothing of HTTP and every page shares the caller's deadline.

use std::collections::HashSet;

use super::api::status_fault;
use super::endpoints::{parse_slices, Found};
use crate::model::Fault;

/// The most slices one page asks for: client-go's default page size.
pub const PAGE_SIZE: u32 = 500;

/// The most pages one list may take before the server is taken to loop.
const MAX_PAGES: usize = 1000;

/// What the API server answers for one page: the status and the body, or why there is
/// none.
pub type Answer = Result<(u16, String), Fault>;

/// The endpoints of every page `ask` answers (`None` asks for the first page, `Some`
/// the page of a continue token); `Ok(None)` when the first page is a 404.
pub fn walk(mut ask: impl FnMut(Option<&str>) -> Answer) -> Result<Option<Vec<Found>>, Fault> {
    match list(&mut ask)? {
        Listed::Expired(_) => match list(&mut ask)? {
            Listed::Expired(f) => Err(f),
            Listed::Done(found) => Ok(found),
        },
        Listed::Done(found) => Ok(found),
    }
}

/// How one walk from the first page ends.
enum Listed {
    /// Every page read (`None`: no EndpointSlice API).
    Done(Option<Vec<Found>>),
    /// A continue token expired: the 410's fault.
    Expired(Fault),
}

/// One walk from the first page to the last.
fn list(ask: &mut impl FnMut(Option<&str>) -> Answer) -> Result<Listed, Fault> {
    let mut found = Vec::new();
    let mut asked = HashSet::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let (status, body) = ask(token.as_deref())?;
        match (status, &token) {
            (200, _) => {}
            (404, None) => return Ok(Listed::Done(None)),
            (410, Some(_)) if is_expired(&body) => {
                return Ok(Listed::Expired(status_fault(status, &body)))
            }
            _ => return Err(status_fault(status, &body)),
        }
        let page = parse_slices(&body)?;
        found.extend(page.found);
        let Some(next) = page.next else {
            return Ok(Listed::Done(Some(found)));
        };
        if !asked.insert(next.clone()) {
            return Err(looped(&next));
        }
        token = Some(next);
    }
    Err(Fault::new(
        "bad_response",
        format!(
            "the EndpointSliceList did not end within {MAX_PAGES} pages of {PAGE_SIZE} \
             (the API server loops)"
        ),
    ))
}

/// Whether a 410's `Status` says its reason is `Expired`: the one 410 that client-go's
/// pager starts the list over for.
fn is_expired(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body)
        .is_ok_and(|status| status["reason"] == "Expired")
}

/// A continue token the server gave a second time.
fn looped(token: &str) -> Fault {
    let start: String = token.chars().take(40).collect();
    Fault::new(
        "bad_response",
        format!(
            "the EndpointSliceList's continue token {start:?} came back (the API server loops)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page with one endpoint on `node` and the continue token `next`.
    fn page(node: &str, next: &str) -> Answer {
        let body = format!(
            r#"{{"kind":"EndpointSliceList","metadata":{{"continue":"{next}"}},"items":[
              {{"addressType":"IPv4","ports":[{{"name":"metrics","port":9477}}],
                "endpoints":[{{"addresses":["10.0.0.1"],"nodeName":"{node}"}}]}}]}}"#
        );
        Ok((200, body))
    }

    fn expired() -> Answer {
        let body = r#"{"kind":"Status","status":"Failure","message":"The provided continue parameter is too old to display a consistent list result.","reason":"Expired","code":410}"#;
        Ok((410, body.to_owned()))
    }

    /// The nodes `walk` lists from `answers` (keyed by the token, `""` for the first
    /// page, each answer given once), and the tokens it asked with.
    fn walk_through(mut answers: Vec<(&str, Answer)>) -> (Result<Vec<String>, Fault>, Vec<String>) {
        let mut asked = Vec::new();
        let listed = walk(|token| {
            let token = token.unwrap_or_default();
            asked.push(token.to_owned());
            let at = answers.iter().position(|(t, _)| *t == token).expect(token);
            answers.remove(at).1
        });
        let nodes = listed.map(|found| {
            found
                .expect("EndpointSlices")
                .into_iter()
                .filter_map(|f| f.node)
                .collect()
        });
        (nodes, asked)
    }

    #[test]
    fn every_page_is_read_until_a_page_has_no_continue_token() {
        let (nodes, asked) = walk_through(vec![
            ("", page("gpu-1", "a")),
            ("a", page("gpu-2", "b")),
            ("b", page("gpu-3", "")),
        ]);
        assert_eq!(nodes.unwrap(), ["gpu-1", "gpu-2", "gpu-3"]);
        assert_eq!(asked, ["", "a", "b"]);
    }

    #[test]
    fn an_expired_token_starts_the_list_over_once() {
        let (nodes, asked) = walk_through(vec![
            ("", page("gpu-1", "a")),
            ("a", expired()),
            ("", page("gpu-1", "c")),
            ("c", page("gpu-2", "")),
        ]);
        assert_eq!(nodes.unwrap(), ["gpu-1", "gpu-2"]);
        assert_eq!(asked, ["", "a", "", "c"]);

        let (nodes, asked) = walk_through(vec![
            ("", page("gpu-1", "a")),
            ("a", expired()),
            ("", page("gpu-1", "c")),
            ("c", expired()),
        ]);
        let f = nodes.unwrap_err();
        assert_eq!(f.kind, "http");
        assert!(
            f.reason
                .starts_with("HTTP 410 Expired: The provided continue"),
            "{}",
            f.reason
        );
        assert_eq!(asked, ["", "a", "", "c"]);
    }

    /// A 410 whose reason is not `Expired` (a proxy's Gone, say) ends the list: only an
    /// expired token starts it over.
    #[test]
    fn a_410_that_is_not_an_expired_token_is_a_fault_not_a_restart() {
        let gone = Ok((410, "<html>Gone</html>".to_owned()));
        let (nodes, asked) = walk_through(vec![("", page("gpu-1", "a")), ("a", gone)]);
        assert!(nodes.unwrap_err().reason.starts_with("HTTP 410"));
        assert_eq!(asked, ["", "a"]);
    }

    #[test]
    fn a_410_for_the_first_page_is_a_fault_not_a_restart() {
        let (nodes, asked) = walk_through(vec![("", expired())]);
        assert!(nodes.unwrap_err().reason.starts_with("HTTP 410"));
        assert_eq!(asked, [""]);
    }

    #[test]
    fn only_a_404_for_the_first_page_means_no_endpointslice_api() {
        let missing = || {
            Ok((
                404,
                r#"{"kind":"Status","reason":"NotFound","code":404}"#.to_owned(),
            ))
        };
        assert!(walk(|_| missing()).unwrap().is_none());
        let (nodes, _) = walk_through(vec![("", page("gpu-1", "a")), ("a", missing())]);
        assert!(nodes.unwrap_err().reason.starts_with("HTTP 404 NotFound"));
    }

    #[test]
    fn a_failed_request_for_a_later_page_fails_the_list() {
        let (nodes, _) = walk_through(vec![
            ("", page("gpu-1", "a")),
            (
                "a",
                Err(Fault::new("timeout", "no answer within --timeout")),
            ),
        ]);
        assert_eq!(nodes.unwrap_err().kind, "timeout");
    }

    #[test]
    fn a_server_that_repeats_a_token_is_a_bad_response() {
        let mut asked = 0;
        let f = walk(|_| {
            asked += 1;
            page("gpu-1", "same")
        })
        .unwrap_err();
        assert_eq!(f.kind, "bad_response");
        assert!(
            f.reason.contains("continue token \"same\" came back"),
            "{}",
            f.reason
        );
        assert_eq!(asked, 2);
    }

    #[test]
    fn a_server_whose_pages_never_end_is_a_bad_response() {
        let mut asked = 0;
        let f = walk(|_| {
            asked += 1;
            page("gpu-1", &format!("t{asked}"))
        })
        .unwrap_err();
        assert_eq!(f.kind, "bad_response");
        assert!(
            f.reason.contains("did not end within 1000 pages of 500"),
            "{}",
            f.reason
        );
        assert_eq!(asked, MAX_PAGES);
    }
}
