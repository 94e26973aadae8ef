//! Unit tests of the command line: tips for wrong flags, values checked at
//! the edge, env fallbacks.

use super::*;
use crate::testing::assert_holds;

/// The error clap gives for `args`, with the tips of `with_tip`.
fn error_of(args: &[&str]) -> String {
    let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    let error = Cli::try_parse_from(&args).expect_err("a bad command line");
    with_tip(error, &args).render().to_string()
}

#[test]
fn flags_of_other_servers_get_a_tip_naming_ours() {
    for (args, tip) in [
        (
            &["portfolio-replica", "--port", "18620"][..],
            "tip: there is no --port: give the API's address with --listen 127.0.0.1:18620",
        ),
        (
            &["portfolio-replica", "serve", "--port=18620"][..],
            "--listen 127.0.0.1:18620 (0.0.0.0:18620 for every interface)",
        ),
        (
            &["portfolio-replica", "--port"][..],
            "--listen 127.0.0.1:PORT",
        ),
        (
            &["portfolio-replica", "--admin-port", "9191"][..],
            "--admin-listen 127.0.0.1:9191",
        ),
        (
            &["portfolio-replica", "--host", "0.0.0.0"][..],
            "as HOST:PORT with --listen",
        ),
    ] {
        let shown = error_of(args);
        assert!(
            shown.contains(tip) && shown.contains("unexpected argument"),
            "{args:?}: {shown}"
        );
    }
    // Other unknown flags keep clap's own message, and no tip of ours.
    let shown = error_of(&["portfolio-replica", "--colour"]);
    assert!(!shown.contains("there is no"), "{shown}");
}

#[test]
fn no_subcommand_means_serve_with_defaults() {
    let cli = Cli::try_parse_from(["portfolio-replica"]).unwrap();
    assert!(cli.command.is_none());
    assert_eq!(cli.serve.listen, "127.0.0.1:8080");
    assert_eq!(cli.serve.key_prefix, "cura");
}

#[test]
fn subcommands_parse() {
    let cli = Cli::try_parse_from([
        "portfolio-replica",
        "generate",
        "--out",
        "x",
        "--scale",
        "large",
        "--seed",
        "7",
    ])
    .unwrap();
    assert!(matches!(
        cli.command,
        Some(Command::Generate {
            scale: Scale::Large,
            seed: 7,
            ..
        })
    ));
    assert!(Cli::try_parse_from(["portfolio-replica", "check"]).is_err());
    assert!(Cli::try_parse_from(["portfolio-replica", "--poll-interval", "0"]).is_err());
    for (text, ms) in [
        ("1000", 1000),
        ("1s", 1000),
        ("1.5s", 1500),
        ("250ms", 250),
        ("2m", 120_000),
    ] {
        let cli = Cli::try_parse_from(["portfolio-replica", "--poll-interval", text]).unwrap();
        assert_eq!(cli.serve.poll_interval, Some(ms), "{text}");
    }
    for bad in ["5", "2h", "1 s x", "s", "-1s", "1d"] {
        assert!(
            Cli::try_parse_from(["portfolio-replica", "--poll-interval", bad]).is_err(),
            "{bad}"
        );
    }
    assert!(Cli::try_parse_from(["portfolio-replica", "--key-prefix", ""]).is_err());
}

#[test]
fn generate_takes_a_fleet_and_escape_text() {
    let generate = |extra: &[&str]| {
        let mut args = vec!["portfolio-replica", "generate", "--out", "x"];
        args.extend_from_slice(extra);
        Cli::try_parse_from(args)
    };
    let cli = generate(&[
        "--scale",
        "tiny",
        "--workspaces",
        "8000",
        "--text",
        "escapes",
    ])
    .unwrap();
    assert!(matches!(
        cli.command,
        Some(Command::Generate {
            scale: Scale::Tiny,
            workspaces: Some(8000),
            text: TextStyle::Escapes,
            ..
        })
    ));
    let cli = generate(&[]).unwrap();
    assert!(matches!(
        cli.command,
        Some(Command::Generate {
            scale: Scale::Small,
            workspaces: None,
            text: TextStyle::Plain,
            ..
        })
    ));
    assert!(generate(&["--scale", "micro", "--workspaces", "0"]).is_err());
    assert!(generate(&["--text", "loud"]).is_err());
}

#[test]
fn listen_addresses_are_host_and_port() {
    for good in [
        "127.0.0.1:8080",
        "0.0.0.0:0",
        "[::1]:8080",
        "[::]:80",
        "localhost:8080",
        "my-host.internal:9090",
    ] {
        assert_eq!(parse_listen(good).as_deref(), Ok(good));
    }
    for (bad, says) in [
        (
            "19082",
            "19082 has no host: expected HOST:PORT such as 127.0.0.1:8080 or 0.0.0.0:8080 (127.0.0.1:19082 for this machine only, 0.0.0.0:19082 for every interface)",
        ),
        (":8080", "no host before the port: expected HOST:PORT"),
        (
            "127.0.0.1:99999",
            "\"99999\" is not a port (0 to 65535): expected HOST:PORT",
        ),
        ("localhost", "expected HOST:PORT such as"),
        ("::1:8080", "expected HOST:PORT such as"),
        ("http://x:80", "expected HOST:PORT such as"),
        ("", "expected HOST:PORT such as"),
    ] {
        let err = parse_listen(bad).unwrap_err();
        assert!(err.starts_with(says), "{bad:?}: {err}");
    }
}

#[test]
fn listeners_on_one_address_conflict() {
    let conflict = |api: &str, admin: &str| {
        let cli = Cli::try_parse_from([
            "portfolio-replica",
            "--listen",
            api,
            "--admin-listen",
            admin,
        ])
        .unwrap();
        cli.serve.listeners_conflict().is_some()
    };
    assert!(conflict("127.0.0.1:8080", "127.0.0.1:8080"));
    assert!(conflict("0.0.0.0:8080", "127.0.0.1:8080"));
    assert!(conflict("127.0.0.1:8080", "0.0.0.0:8080"));
    assert!(conflict("[::]:8080", "127.0.0.1:8080"));
    assert!(conflict("localhost:8080", "LOCALHOST:8080"));
    assert!(!conflict("127.0.0.1:8080", "127.0.0.1:9090"));
    assert!(!conflict("127.0.0.1:0", "127.0.0.1:0"));
    assert!(!conflict("127.0.0.1:8080", "127.0.0.2:8080"));
    assert!(!conflict("0.0.0.0:8080", "[::1]:8080"));
    assert!(!conflict("localhost:0", "localhost:0"));
}

#[test]
fn precompression_is_on_unless_turned_off_or_compression_is() {
    let config = |args: &[&str]| {
        let cli = Cli::try_parse_from([&["portfolio-replica"], args].concat()).unwrap();
        ServeConfig::from(&cli.serve)
    };
    assert!(config(&[]).precompress);
    assert!(
        ServeConfig::new(std::path::Path::new("snapshots")).precompress,
        "as on the command line"
    );
    assert!(config(&["--precompress", "on"]).precompress);
    assert!(!config(&["--precompress", "off"]).precompress);
    for args in [
        &["--compression", "off"][..],
        &["--compression", "off", "--precompress", "on"],
    ] {
        let off = config(args);
        assert!(
            !off.compression && !off.precompress,
            "nothing to precompress for: {args:?}"
        );
    }
    assert!(Cli::try_parse_from(["portfolio-replica", "--precompress", "maybe"]).is_err());
}

#[test]
fn snapshots_are_a_directory_or_a_store_url_typed_by_the_command_line() {
    let parse = |args: &[&str]| Cli::try_parse_from([&["portfolio-replica"], args].concat());
    let location = |args: &[&str]| ServeConfig::from(&parse(args).unwrap().serve).snapshots;
    assert_eq!(
        location(&[]),
        Location::Directory(std::path::PathBuf::from("./snapshots"))
    );
    assert!(matches!(
        location(&["--snapshots", "s3://fleet/prefix/"]),
        Location::Url(url) if url.as_str() == "s3://fleet/prefix/"
    ));
    // A bad URL stops the command line, naming the flag and the problem.
    let error = parse(&["--snapshots", "ftp://host/x/"])
        .unwrap_err()
        .to_string();
    assert_holds(
        &error,
        &["--snapshots <DIR|URL>", "unsupported storage URL"],
    );
}

#[test]
fn a_signature_is_valid_for_a_duration_with_its_unit() {
    assert_eq!(
        parse_valid_for(DEFAULT_SIGN_VALID_FOR),
        Ok(portfolio_wire::signed::DEFAULT_VALID_FOR)
    );
    for (text, secs) in [
        ("30m", 1800),
        ("12h", 43_200),
        ("3600s", 3600),
        ("1.5d", 129_600),
        ("365d", 365 * 86_400),
    ] {
        assert_eq!(
            parse_valid_for(text),
            Ok(Duration::from_secs(secs)),
            "{text}"
        );
    }
    for text in ["0", "0s", "7", "", "7 days", "-1d"] {
        let err = parse_valid_for(text).unwrap_err();
        assert!(err.contains("30m, 12h, 7d"), "{text}: {err}");
    }
    let err = parse_valid_for("366d").unwrap_err();
    assert!(err.contains("more than 365d"), "{err}");
}

#[test]
fn signing_flags_go_with_the_commands_that_need_them() {
    let parse = |args: &[&str]| {
        Cli::try_parse_from(["portfolio-replica"].iter().chain(args))
            .map(|cli| cli.command)
            .map_err(|e| e.render().to_string())
    };
    let to = "file:///tmp/fleet/";
    let Ok(Some(Command::Publish {
        files,
        refresh_signatures: true,
        workspaces,
        signing,
        ..
    })) = parse(&[
        "publish",
        "--refresh-signatures",
        "--to",
        to,
        "--sign-key",
        "k.key",
        "--workspace",
        "ws-a",
    ])
    else {
        panic!("a refresh parses");
    };
    assert!(files.is_empty());
    assert_eq!(workspaces, ["ws-a"]);
    assert_eq!(signing.sign_valid_for, Duration::from_secs(7 * 86_400));
    // A refresh needs the key, and takes no file; a publish needs a file.
    let err = parse(&["publish", "--refresh-signatures", "--to", to]).unwrap_err();
    assert!(err.contains("--sign-key"), "{err}");
    let err = parse(&[
        "publish",
        "a.json",
        "--refresh-signatures",
        "--sign-key",
        "k",
        "--to",
        to,
    ])
    .unwrap_err();
    assert!(err.contains("cannot be used with"), "{err}");
    assert!(parse(&["publish", "--to", to]).is_err());
    let err = parse(&["publish", "a.json", "--to", to, "--workspace", "w"]).unwrap_err();
    assert!(err.contains("--refresh-signatures"), "{err}");
    // `sign` needs its key; publish and rollback do not.
    let err = parse(&["sign", "a.json"]).unwrap_err();
    assert!(err.contains("--sign-key"), "{err}");
    assert!(
        parse(&[
            "sign",
            "a.json",
            "--sign-key",
            "k",
            "--sign-valid-for",
            "12h"
        ])
        .is_ok()
    );
    assert!(parse(&["rollback", "ws", "--to", to, "--sign-valid-for", "1d"]).is_ok());
    let err = parse(&["rollback", "ws", "--to", to, "--sign-valid-for", "0s"]).unwrap_err();
    assert!(err.contains("more than 0"), "{err}");
}

#[test]
fn sizes_are_whole_numbers_and_a_budget_of_bare_digits_is_at_least_a_mebibyte() {
    // One parser for every size flag (--max-header-bytes too, below): the
    // same value reads the same.
    for flag in ["--memory-limit", "--memory-budget"] {
        let cli = Cli::try_parse_from(["portfolio-replica", flag, "2GiB"]).unwrap();
        let read = [cli.serve.memory_limit, cli.serve.memory_budget];
        assert!(read.contains(&Some(2 << 30)), "{flag}: {read:?}");
        let shown = error_of(&["portfolio-replica", flag, "1.5G"]);
        assert!(
            shown.contains("sizes take whole numbers; write 1536MiB instead")
                && !shown.contains("unknown unit"),
            "{flag} 1.5G: {shown}"
        );
    }
    // --max-header-bytes is a size too, within its range.
    for (text, bytes) in [("16384", 16_384), ("32K", 32_768), ("1MiB", 1 << 20)] {
        let cli = Cli::try_parse_from(["portfolio-replica", "--max-header-bytes", text]).unwrap();
        assert_eq!(cli.serve.max_header_bytes, bytes, "{text}");
    }
    for (text, says) in [
        ("1023", "is not from 1KiB (1024) to 1MiB (1048576) bytes"),
        ("2M", "is not from 1KiB (1024) to 1MiB (1048576) bytes"),
        ("1.5K", "sizes take whole numbers; write 1536 instead"),
    ] {
        let shown = error_of(&["portfolio-replica", "--max-header-bytes", text]);
        assert!(shown.contains(says), "{text}: {shown}");
    }
    let shown = error_of(&["portfolio-replica", "--memory-budget", "64"]);
    assert!(
        shown.contains(
            "--memory-budget 64 (or PORTFOLIO_MEMORY_BUDGET): 64 bytes, below 1 MiB; did you \
             mean 64MiB? (a budget under 1 MiB takes its unit: 512KiB, or 64B for bytes)"
        ),
        "{shown}"
    );
    // With its unit a small budget is meant (a fleet of 10 KB workspaces),
    // and plain digits from 1 MiB on are bytes.
    for (text, bytes) in [
        ("512K", 512 << 10),
        ("65536B", 65_536),
        ("1048576", 1 << 20),
        ("64MiB", 64 << 20),
    ] {
        let cli = Cli::try_parse_from(["portfolio-replica", "--memory-budget", text]).unwrap();
        assert_eq!(cli.serve.memory_budget, Some(bytes), "{text}");
    }
}

#[test]
fn a_rate_is_a_plain_number_or_per_second() {
    for text in ["5", "5/s", " 5 /s"] {
        let cli = Cli::try_parse_from(["portfolio-replica", "--rate-limit", text]).unwrap();
        assert_eq!(cli.serve.rate_limit.map(|r| r.get()), Some(5), "{text:?}");
    }
    for bad in ["0", "0/s", "5/m", "five", "1.5", ""] {
        let shown = error_of(&["portfolio-replica", "--rate-limit", bad]);
        assert!(shown.contains("like 100 or 100/s"), "{bad:?}: {shown}");
    }
}

/// The --help text of `subcommand` (`None`: the top level, which is serve).
fn help_of(subcommand: Option<&str>) -> String {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    cli.build();
    match subcommand {
        Some(name) => cli
            .find_subcommand_mut(name)
            .expect("a subcommand")
            .render_help(),
        None => cli.render_help(),
    }
    .to_string()
}

#[test]
fn sign_and_cache_dir_help_say_what_they_do_once() {
    let sign = help_of(Some("sign"));
    assert!(
        sign.contains("to sign each file with") && !sign.contains("make current"),
        "sign --help speaks of publish's versions:\n{sign}"
    );
    assert!(sign.contains("The files to sign"), "{sign}");
    // publish keeps its own words.
    assert!(help_of(Some("publish")).contains("sign each version they make current"));
    let serve = help_of(None);
    let cache_dir = serve
        .split("--cache-dir <DIR>")
        .nth(1)
        .and_then(|rest| rest.split("\n      --").next())
        .expect("--cache-dir in --help");
    for says in [
        "writable disk",
        "--memory-budget",
        "DIR/copies",
        "--trust-key",
        "DIR/accepted",
    ] {
        assert!(
            cache_dir.contains(says),
            "--cache-dir's help lacks {says:?}:{cache_dir}"
        );
    }
    // Each thing once.
    assert_eq!(cache_dir.matches("--trust-key").count(), 1, "{cache_dir}");
}

#[test]
fn the_rate_limits_help_gives_both_forms() {
    let serve = help_of(None);
    assert_holds(&serve, &["--rate-limit <RATE>", "`100` or `100/s`"]);
}
