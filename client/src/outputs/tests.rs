use super::*;
use gpupeek_shm::layout::{gpu_valid as v, GpuState};
use gpupeek_shm::GpuRecord;

const GIB: u64 = 1 << 30;

fn snapshot(states: &[GpuState]) -> Snapshot {
    let gpus = states
        .iter()
        .enumerate()
        .map(|(i, &state)| {
            let mut g = GpuRecord {
                index: i as u32,
                state: state as u32,
                valid: v::NAME | v::MEMORY | v::UTILIZATION | v::TEMPERATURE | v::POWER_DRAW,
                util_gpu_pct: 40 + 40 * i as u32,
                mem_used_bytes: 10 * GIB,
                mem_total_bytes: 80 * GIB,
                temp_gpu_c: 60,
                power_draw_mw: 100_000,
                ..GpuRecord::default()
            };
            g.name[..7].copy_from_slice(b"A&B<GPU");
            g
        })
        .collect();
    crate::testing::live_snapshot(gpus)
}

fn line(kind: &str, format: &str, states: &[GpuState]) -> String {
    let r = Renderer::new(Kind::parse(kind).unwrap(), Some(format), None, false).unwrap();
    r.live(&snapshot(states), &[], None).unwrap()
}

const TWO: &[GpuState] = &[GpuState::Ok, GpuState::Ok];

#[test]
fn waybar_prints_its_documented_keys_with_pango_escaped_text() {
    let out = line("waybar", "{0.name} {max.util!70,90}%", TWO);
    assert!(out.ends_with('\n') && !out.trim_end().contains('\n'));
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["alt", "class", "percentage", "text", "tooltip"]);
    assert_eq!(doc["text"], "A&amp;B&lt;GPU 80%");
    assert_eq!(doc["class"], "warning");
    assert_eq!(doc["percentage"], 60);
    assert_eq!(
        doc["tooltip"],
        "GPU 0 A&amp;B&lt;GPU: 40% · 10.0/80.0 GiB · 60°C · 100 W\n\
         GPU 1 A&amp;B&lt;GPU: 80% · 10.0/80.0 GiB · 60°C · 100 W"
    );
}

#[test]
fn every_gpu_asleep_is_the_suspended_class_and_nothing_in_a_prompt() {
    let asleep = &[GpuState::Suspended, GpuState::Idle];
    let doc: serde_json::Value = serde_json::from_str(&line("waybar", "{util}", asleep)).unwrap();
    assert_eq!(
        (doc["class"].as_str(), doc["text"].as_str()),
        (Some("suspended"), Some("GPU asleep"))
    );
    assert_eq!(
        doc["tooltip"],
        "GPU 0 A&amp;B&lt;GPU: suspended\nGPU 1 A&amp;B&lt;GPU: idle"
    );
    assert_eq!(line("bash", "{util}", asleep), "\n");
    let r = Renderer::new(Kind::Zsh, None, Some("zz"), false).unwrap();
    assert_eq!(r.live(&snapshot(asleep), &[], None).unwrap(), "zz\n");
    // One GPU asleep: the other is shown, the sleeper's values are N/A.
    assert_eq!(
        line(
            "text",
            "{each ' '}{util}{end}",
            &[GpuState::Ok, GpuState::Suspended]
        ),
        "40 N/A\n"
    );
}

#[test]
fn tmux_and_polybar_colour_thresholded_values_in_their_own_syntax() {
    assert_eq!(
        line("tmux", "#{each ' '}{util!50,75}{end}", TWO),
        "##40 #[fg=red]80#[fg=default]\n"
    );
    assert_eq!(
        line("polybar", "{each ' '}{util!50,90}{end}", TWO),
        "40 %{F#f0c674}80%{F-}\n"
    );
}

#[test]
fn prompts_mark_colour_escapes_as_invisible() {
    assert_eq!(
        line("bash", "{1.util!50}%", TWO),
        "\x01\x1b[33m\x0280\x01\x1b[0m\x02%\n"
    );
    assert_eq!(line("zsh", "{1.util!50}%", TWO), "%F{yellow}80%f%%\n");
    assert_eq!(line("p10k", "{1.util!50}%", TWO), "80%%\n");
    assert_eq!(line("fish", "{1.util!50,60}", TWO), "\x1b[31m80\x1b[0m\n");
    assert_eq!(line("starship", "{1.util!50}%", TWO), "80%\n");
    assert_eq!(
        line("text", "{1.util!50}%", TWO),
        "80%\n",
        "no colour off a terminal"
    );
}

#[test]
fn i3_outputs_are_json_with_a_state() {
    let doc: serde_json::Value =
        serde_json::from_str(&line("i3blocks", "{max.util!70}", TWO)).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({"full_text": "80", "short_text": "80", "color": "#f0c674"})
    );
    let doc: serde_json::Value =
        serde_json::from_str(&line("i3status-rust", "{max.util!90}", TWO)).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({"icon": "gpu", "state": "Info", "text": "80", "short_text": "80"})
    );
}

#[test]
fn a_daemon_that_is_down_is_a_stopped_line() {
    let r = Renderer::new(Kind::Waybar, None, None, false).unwrap();
    let exit = Exit::new(
        crate::EXIT_STALE,
        "gpupeekd on segment 'x' is not responding",
    );
    let doc: serde_json::Value = serde_json::from_str(&r.down(&exit)).unwrap();
    assert_eq!(doc["class"], "stopped");
    assert_eq!(doc["text"], "GPU: daemon not responding");
    assert_eq!(doc["tooltip"], "gpupeekd on segment 'x' is not responding");
    let r = Renderer::new(Kind::Bash, None, None, false).unwrap();
    assert_eq!(r.down(&exit), "\n");
}

#[test]
fn unknown_outputs_and_bad_templates_are_usage_errors() {
    assert!(Kind::parse("dwm").unwrap_err().contains("waybar"));
    let Err(e) = Renderer::new(Kind::Text, Some("{utl}"), None, false) else {
        panic!("bad template accepted");
    };
    assert_eq!(e.code, EXIT_USAGE);
    assert!(
        e.message.starts_with("bad --format template at column 2"),
        "{}",
        e.message
    );
}

#[test]
fn a_lost_gpu_is_left_out_of_waybars_percentage_and_its_tooltip_says_lost() {
    let mut snap = snapshot(&[GpuState::Lost, GpuState::Ok]);
    snap.gpus[0].valid = v::NAME;
    snap.gpus[0].util_gpu_pct = 0;
    let r = Renderer::new(Kind::Waybar, Some("{util}%"), None, false).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&r.live(&snap, &[], None).unwrap()).unwrap();
    assert_eq!(
        (doc["text"].as_str(), doc["percentage"].as_u64()),
        (Some("80%"), Some(80))
    );
    assert_eq!(
        doc["tooltip"],
        "GPU 0 A&amp;B&lt;GPU: lost\nGPU 1 A&amp;B&lt;GPU: 80% · 10.0/80.0 GiB · 60°C · 100 W"
    );
}

#[test]
fn a_gpu_whose_driver_is_not_responding_is_named_on_the_line_and_sets_its_class() {
    let mut snap = snapshot(&[GpuState::Ok, GpuState::NotResponding]);
    // The record may still hold old numbers: none of them is shown or counted.
    snap.gpus[1].util_gpu_pct = 99;
    let r = Renderer::new(Kind::Waybar, Some("{util}%"), None, false).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&r.live(&snap, &[], None).unwrap()).unwrap();
    assert_eq!(doc["text"], "40% [GPU 1 not responding]");
    assert_eq!(
        (doc["class"].as_str(), doc["alt"].as_str()),
        (Some("not_responding"), Some("not_responding"))
    );
    assert_eq!(doc["percentage"], 40);
    assert_eq!(
        doc["tooltip"],
        "GPU 0 A&amp;B&lt;GPU: 40% · 10.0/80.0 GiB · 60°C · 100 W\nGPU 1 A&amp;B&lt;GPU: not responding"
    );
    let hung = &[GpuState::NotResponding, GpuState::Ok];
    assert_eq!(
        line("tmux", "{util}%", hung),
        "80% #[fg=red][GPU 0 not responding]#[fg=default]\n"
    );
    assert_eq!(
        line("bash", "{util}%", hung),
        "80% \x01\x1b[31m\x02[GPU 0 not responding]\x01\x1b[0m\x02\n"
    );
    let doc: serde_json::Value = serde_json::from_str(&line("i3blocks", "{util}", hung)).unwrap();
    assert_eq!(doc["color"], "#ff5555");
    let doc: serde_json::Value =
        serde_json::from_str(&line("i3status-rust", "{util}", hung)).unwrap();
    assert_eq!(doc["state"], "Critical");
}

#[test]
fn no_gpu_awake_and_one_not_responding_is_a_line_of_its_own_even_in_a_prompt() {
    let states = &[GpuState::NotResponding, GpuState::Suspended];
    let doc: serde_json::Value = serde_json::from_str(&line("waybar", "{util}", states)).unwrap();
    assert_eq!(
        (doc["text"].as_str(), doc["class"].as_str()),
        (Some("GPU not responding"), Some("not_responding"))
    );
    assert_eq!(line("starship", "{util}", states), "GPU not responding\n");
    assert_eq!(line("text", "{util}", states), "GPU not responding\n");
    assert_eq!(
        line("polybar", "{util}", states),
        "%{F#ff5555}GPU not responding%{F-}\n"
    );
}

#[test]
fn a_released_daemon_is_its_own_quiet_class_not_a_stopped_one() {
    let exit = Exit::new(
        crate::EXIT_RELEASED,
        "gpupeekd on segment 'x' has let go of the driver on request",
    );
    let r = Renderer::new(Kind::Waybar, None, None, false).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&r.down(&exit)).unwrap();
    assert_eq!(
        (doc["class"].as_str(), doc["text"].as_str()),
        (Some("released"), Some("GPU: released"))
    );
    assert_eq!(doc["tooltip"], exit.message);
    let r = Renderer::new(Kind::I3blocks, None, None, false).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&r.down(&exit)).unwrap();
    assert_eq!(doc["color"], "#888888");
    let r = Renderer::new(Kind::I3statusRust, None, None, false).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&r.down(&exit)).unwrap();
    assert_eq!(doc["state"], "Idle");
    let r = Renderer::new(Kind::Tmux, None, None, false).unwrap();
    assert_eq!(r.down(&exit), "GPU: released\n");
    let r = Renderer::new(Kind::Bash, None, None, false).unwrap();
    assert_eq!(r.down(&exit), "\n");
}

#[test]
fn a_starting_daemon_is_told_by_its_state_not_by_the_words_of_its_message() {
    let r = Renderer::new(Kind::Tmux, None, None, false).unwrap();
    let line = |liveness| {
        let exit = crate::check_live("starting-gpus", liveness, 1_000_000_000).unwrap_err();
        r.down(&exit)
    };
    assert_eq!(line(gpupeek_shm::Liveness::Starting), "GPU: starting\n");
    // A segment whose name says "starting": its stopped daemon is not a starting one.
    assert_eq!(line(gpupeek_shm::Liveness::Stopped), "GPU: no daemon\n");
}

#[test]
fn help_lists_every_template_field_of_the_field_table() {
    let help = HELP.replace('\n', " ");
    for name in crate::template::field_names() {
        assert!(
            help.contains(&format!(" {name},")) || help.contains(&format!(" {name}.")),
            "--help does not list the template field {name}"
        );
    }
}
