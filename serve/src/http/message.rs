//! HTTP/1.x messages as the exporter's server reads and writes them: the request line and
//! the two headers it acts on, and a response with its length, optional gzip body and
//! `Connection: close`.

use std::io::Write;

use super::{Request, Response};

pub(super) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The request line of `head` (`METHOD SP TARGET SP HTTP/1.x`) and its `Authorization`
/// and `Accept-Encoding` headers; `None` if malformed.
pub(super) fn parse(head: &[u8]) -> Option<Request<'_>> {
    let head = std::str::from_utf8(head).ok()?;
    let mut lines = head.split("\r\n");
    let line = lines.next()?;
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let valid = parts.next().is_none()
        && !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_uppercase())
        && target.starts_with('/')
        && version.starts_with("HTTP/1.");
    if !valid {
        return None;
    }
    let mut request = Request {
        method,
        path: target.split('?').next().unwrap_or(target),
        authorization: None,
        gzip: false,
    };
    for header in lines {
        let (name, value) = header.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("authorization") {
            request.authorization = Some(value);
        } else if name.eq_ignore_ascii_case("accept-encoding") {
            request.gzip |= accepts_gzip(value);
        }
    }
    Some(request)
}

/// Whether an `Accept-Encoding` value allows gzip (`gzip` or `*`, without `q=0`).
fn accepts_gzip(value: &str) -> bool {
    value.split(',').any(|coding| {
        let mut params = coding.split(';').map(str::trim);
        let name = params.next().unwrap_or_default();
        let refused = params.any(|p| {
            p.strip_prefix("q=")
                .is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q == 0.0))
        });
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
    })
}

pub(super) fn plain(status: u16, body: &str) -> Response {
    Response {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.to_owned(),
        extra: Vec::new(),
    }
}

fn gzip(body: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::fast(),
    );
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(body);
    encoder.finish().unwrap_or_default()
}

/// The response's bytes: `head_only` (HEAD) leaves the body out, `gzip` compresses it,
/// `headers` are added.
pub(super) fn encode(
    response: &Response,
    head_only: bool,
    gzip_ok: bool,
    headers: &[(String, String)],
) -> Vec<u8> {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    };
    let mut extra = String::new();
    if response.status == 405 {
        extra += "Allow: GET, HEAD\r\n";
    }
    for (name, value) in response
        .extra
        .iter()
        .map(|(n, v)| (*n, v.as_str()))
        .chain(headers.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    {
        extra += &format!("{name}: {value}\r\n");
    }
    let compressed;
    let body = if gzip_ok && !response.body.is_empty() {
        compressed = gzip(response.body.as_bytes());
        extra += "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n";
        &compressed[..]
    } else {
        response.body.as_bytes()
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{extra}\
         Connection: close\r\n\r\n",
        response.status,
        response.content_type,
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_used_when_accepted_and_not_when_refused() {
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("deflate, gzip;q=0.5"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip("xgzip"));
    }

    #[test]
    fn headers_are_read_whatever_their_case() {
        let r =
            parse(b"GET /metrics?x HTTP/1.1\r\nauthorization: Basic YTpi\r\nACCEPT-ENCODING: gzip")
                .unwrap();
        assert_eq!(
            (r.path, r.authorization, r.gzip),
            ("/metrics", Some("Basic YTpi"), true)
        );
        assert!(parse(b"GET / HTTP/1.1\r\nno colon").is_none());
    }

    #[test]
    fn a_gzip_body_decodes_to_the_original() {
        use std::io::Read;
        let response = plain(200, "hello hello hello\n");
        let out = encode(&response, false, true, &[("X-A".into(), "b".into())]);
        let end = find(&out, b"\r\n\r\n").unwrap();
        let head = std::str::from_utf8(&out[..end]).unwrap();
        assert!(head.contains("Content-Encoding: gzip\r\n"), "{head}");
        assert!(head.contains("X-A: b\r\n"), "{head}");
        let mut body = String::new();
        flate2::read::GzDecoder::new(&out[end + 4..])
            .read_to_string(&mut body)
            .unwrap();
        assert_eq!(body, "hello hello hello\n");
    }
}
