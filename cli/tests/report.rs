//! End to end: a real matrix on a farm of processes on 127.0.0.1, its
//! `farmctl report` rendered in Debian's headless Chromium.
//!
//! Chromium is required, not optional: without it this test fails and says
//! which package to install.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use common::browser::{WINDOW, browse, chromium, console, file_url, screenshot};
use common::{Farm, serial};
use serde_json::Value;

/// cpu-hog on 1 and 2 threads, 3 runs of about 1 s each, 2 against 1.
const MATRIX: &str = r#"
name = "report-e2e"
repetitions = 3
timeout_s = 60

[[workloads]]
name = "cpu-hog"
params = { threads = [1, 2], seconds = 1 }

[baseline]
threads = 1
"#;

/// The cell's `<section>` of a rendered DOM.
fn section(dom: &str, index: u64) -> &str {
    let start = dom
        .find(&format!(r#"<section class="cell" id="cell-{index}""#))
        .unwrap_or_else(|| panic!("no section for cell {index}"));
    let rest = &dom[start..];
    &rest[..rest.find("</section>").unwrap_or(rest.len())]
}

/// The verdict a cell's JSON gives, as the page's badge class names it
/// (`no_change`), if the coordinator gave one.
fn verdict_of(cell: &Value) -> Option<String> {
    let v = match &cell["verdict"] {
        Value::String(s) => s.to_lowercase(),
        Value::Number(n) => match n.as_u64() {
            Some(1) => "regression".into(),
            Some(2) => "improvement".into(),
            Some(3) => "no_change".into(),
            Some(4) => "inconclusive".into(),
            _ => return None,
        },
        _ => return None,
    };
    let v = v.trim_start_matches("verdict_").replace([' ', '-'], "_");
    (!v.is_empty() && v != "unspecified").then_some(v)
}

#[test]
fn report_renders_in_headless_chromium() {
    // Before any farm: a missing browser fails at once.
    chromium();
    let _g = serial();
    let mut farm = Farm::start(&[]);
    farm.start_agent();
    farm.wait_agents(1);
    let id = farm.submit(&farm.write("m.toml", MATRIX));
    let out = farm.farmctl(&["watch", &id]);
    assert!(
        out.status.success(),
        "watch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = farm.results(&id);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);

    // The file: one self-contained document.
    let dir = farm.dir.path().to_path_buf();
    let html_path = dir.join("report.html");
    let out = farm.farmctl(&["report", &id, "-o", html_path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script"), "the report has a script");
    for net in ["http://", "https://", "url(", "@import", "@font-face"] {
        assert!(!html.contains(net), "the report refers to {net:?}");
    }
    assert!(html.contains("Content-Security-Policy"));
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    assert!(html.contains(&id));

    // The detector of console errors works here: a page with an attribute
    // the browser cannot draw logs one. (The report has no script, so what
    // it can log is exactly that — a NaN in a plot, say — or a blocked load:
    // its Content-Security-Policy forbids every fetch, and the browser logs
    // each one it blocks. Missing files are not logged, blocked ones are.)
    let probe = dir.join("probe.html");
    std::fs::write(
        &probe,
        r#"<!DOCTYPE html><html><body><svg width="10" height="10"><circle r="NaN"/></svg></body></html>"#,
    )
    .unwrap();
    let b = browse(&dir, &["--dump-dom".into(), file_url(&probe)]);
    assert!(
        !console(&b.stderr).is_empty(),
        "chromium logged no console message for a broken SVG attribute, so \
         the error check below would prove nothing:\n{}",
        b.stderr
    );

    // The screenshot: a real image of the window's size, and far more in it
    // than in a blank page's.
    let png = dir.join("report.png");
    let (w, h, size) = screenshot(&dir, &file_url(&html_path), &png);
    assert_eq!((w, h), WINDOW, "screenshot size");
    let (_, _, blank) = screenshot(&dir, "about:blank", &dir.join("blank.png"));
    assert!(
        size > 2 * blank,
        "the screenshot ({size} bytes) looks blank (a blank page: {blank} bytes)"
    );
    if let Some(keep) = std::env::var_os("FARM_REPORT_SCREENSHOT") {
        std::fs::copy(&png, &keep).unwrap();
    }

    // The page as the browser built it, and what it logged meanwhile.
    let b = browse(&dir, &["--dump-dom".into(), file_url(&html_path)]);
    let errors = console(&b.stderr);
    assert!(errors.is_empty(), "the page logged:\n{}", errors.join("\n"));
    let dom = b.stdout;
    assert!(dom.contains("<h1>"), "no page in the DOM: {dom}");
    assert!(dom.contains(r#"class="overview""#));
    let mut heat_maps_expected = 0;
    for c in cells {
        let index = c["index"].as_u64().unwrap();
        let s = section(&dom, index);
        // A strip plot per primary metric (hog_ops_per_s and wall_s).
        assert_eq!(
            s.matches(r#"class="plot strip""#).count(),
            2,
            "strip plots of cell {index}: {s}"
        );
        assert!(s.contains(r#"role="img" aria-label="strip plot of wall_s"#));
        // Heat maps where the representative run has a placement series.
        let rep = c["representative_run"].as_str().unwrap_or_default();
        let series = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == rep)
            .and_then(|r| r["telemetry"]["series"].as_array())
            .map_or(0, Vec::len);
        if series > 0 {
            heat_maps_expected += 1;
            assert!(
                s.contains(r#"class="plot heatmap""#),
                "no heat map in cell {index} though run {rep} has {series} ticks"
            );
        }
        // The badge: the coordinator's verdict when it gives one, else
        // "baseline" for the baseline and "no verdict" for the other.
        let badge = match verdict_of(c) {
            Some(v) => v,
            None if c["baseline"].is_null() => "baseline".into(),
            None => "none".into(),
        };
        if verdict_of(c).is_some() && !c["baseline"].is_null() {
            // Judged: the comparison line with its p-value under the plots.
            assert!(
                s.contains(" vs ") && (s.contains("p = ") || s.contains("p &lt; ")),
                "no comparison line in cell {index}: {s}"
            );
        }
        let head = &s[..s.find("</h2>").unwrap()];
        assert!(
            head.contains(&format!(r#"class="badge v-{badge}""#)),
            "cell {index} should wear the badge {badge}: {head}"
        );
        assert!(
            dom.contains(&format!(r##"<a href="#cell-{index}">"##)),
            "the overview lists cell {index}"
        );
    }
    assert!(
        heat_maps_expected > 0,
        "no representative run has a placement series: {v}"
    );
    // The compared cell's ratio, drawn in the overview.
    assert_eq!(dom.matches(r#"class="plot ratio""#).count(), 1);
}
