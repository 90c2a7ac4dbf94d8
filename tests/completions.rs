//! The committed completion scripts in completions/ match what the current
//! command line generates. To refresh them after changing flags:
//! `DPCTL_BLESS=1 cargo test --test integration completions`.

use clap_complete::Shell;
use dpctl::cli::completions::{file_name, render};

#[test]
fn committed_completions_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    let bless = std::env::var_os("DPCTL_BLESS").is_some();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let path = dir.join(file_name(shell));
        let fresh = render(shell);
        if bless {
            std::fs::write(&path, &fresh).unwrap();
            continue;
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(
            committed == fresh,
            "{} is out of date: run `DPCTL_BLESS=1 cargo test --test integration completions` and commit it",
            path.display()
        );
    }
}

#[tokio::test]
async fn completions_command_prints_the_script() {
    let r = crate::support::dpctl(&["completions", "bash"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("_dpctl()"), "{}", &r.stdout[..200.min(r.stdout.len())]);
    assert!(r.stdout.contains("kubelet-sim"));
}

/// Completions offer values, not file names: the kubelet releases for
/// `--kubelet-version`, the check names for `--only`/`--skip`, the ways for
/// `--registration` (fish lists each value on its own).
#[tokio::test]
async fn completions_offer_kubelet_versions_check_names_and_registration_ways() {
    let r = crate::support::dpctl(&["completions", "fish"]).await;
    r.expect_code(0);
    // One `complete` command per option; its values may span lines.
    let line = |needle: &str| {
        let at = r.stdout.find(needle).unwrap_or_else(|| panic!("no {needle}"));
        let rest = &r.stdout[at..];
        rest[..rest.find("\ncomplete ").unwrap_or(rest.len())].to_string()
    };
    let kv = line("-l kubelet-version");
    assert!(kv.contains("1.26") && kv.contains("1.37") && kv.contains("master"), "{kv}");
    let only = line("-l only");
    assert!(only.contains("allocate-unknown-id") && only.contains("options-answer"), "{only}");
    // `dra mock --registration` is a socket path; mock-plugin's names the ways.
    let ways = r.stdout.split("\ncomplete ").filter(|c| c.contains("-l registration")).collect::<Vec<_>>();
    assert!(ways.iter().any(|c| c.contains("kubelet-sock") && c.contains("plugins-registry")), "{ways:#?}");
}
