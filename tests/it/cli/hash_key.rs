//! `hash-key`: prints the SHA-256 that a snapshot lists, from the argument
//! or stdin, and refuses keys that could never authenticate.

use super::{Env, Stdin, run};
use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_key_prints_the_sha256_of_the_whole_key() {
    let mut failures = Vec::new();
    // (what, args, stdin, the key hashed)
    let cases: Vec<(&str, Vec<&str>, Stdin, &str)> = vec![
        (
            "argument",
            vec!["hash-key", "cura_demo_acme_key"],
            None,
            "cura_demo_acme_key",
        ),
        ("argument", vec!["hash-key", "cura_a_b"], None, "cura_a_b"),
        (
            "stdin, no argument",
            vec!["hash-key"],
            Some(b"cura_test_key\n"),
            "cura_test_key",
        ),
        (
            "stdin, no newline",
            vec!["hash-key"],
            Some(b"cura_test_key"),
            "cura_test_key",
        ),
        (
            "stdin, CRLF",
            vec!["hash-key"],
            Some(b"cura_test_key\r\n"),
            "cura_test_key",
        ),
        (
            "stdin via -",
            vec!["hash-key", "-"],
            Some(b"cura_s3cret\n"),
            "cura_s3cret",
        ),
        (
            "--key-prefix",
            vec!["hash-key", "--key-prefix", "acme", "acme_k"],
            None,
            "acme_k",
        ),
    ];
    for (what, args, stdin, key) in cases {
        let out = run(&args, stdin, &[]).await;
        let want = key_hash(key);
        if out.code != Some(0) || out.stdout != format!("{want}\n") {
            failures.push(format!(
                "hash-key ({what}) {args:?}: exit {:?}, stdout {:?}, stderr {:?}, expected {want}",
                out.code, out.stdout, out.stderr
            ));
        }
    }
    let env = run(
        &["hash-key", "acme_k"],
        None,
        &[("PORTFOLIO_KEY_PREFIX", "acme")],
    )
    .await;
    if env.code != Some(0) || env.stdout.trim() != key_hash("acme_k") {
        failures.push(format!(
            "PORTFOLIO_KEY_PREFIX=acme hash-key acme_k: {env:?}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_key_refuses_keys_that_can_never_authenticate() {
    let no_prefix = "error: the key does not start with \"cura_\": keys are <prefix>_<secret> \
                     and the prefix is \"cura\" (--key-prefix or PORTFOLIO_KEY_PREFIX, as given to the server)\n";
    let not_ascii = "error: the key holds characters other than printable ASCII";
    // (args, stdin, env, what stderr starts with)
    let cases: Vec<(Vec<&str>, Stdin, Env, &str)> = vec![
        (vec!["hash-key", "x"], None, vec![], no_prefix),
        (vec!["hash-key", "s3cret"], None, vec![], no_prefix),
        (vec!["hash-key"], Some(b"other_s3cret\n"), vec![], no_prefix),
        (
            vec!["hash-key", "cura_"],
            None,
            vec![],
            "error: the key has nothing after \"cura_\": a key is cura_<secret> with a non-empty secret\n",
        ),
        (
            vec!["hash-key", "--key-prefix", "acme", "cura_s3cret"],
            None,
            vec![],
            "error: the key does not start with \"acme_\"",
        ),
        (
            vec!["hash-key", "cura_s3cret"],
            None,
            vec![("PORTFOLIO_KEY_PREFIX", "acme")],
            "error: the key does not start with \"acme_\"",
        ),
        (
            vec!["hash-key"],
            Some(b""),
            vec![],
            "error: no key given: pass it as the argument, or on stdin",
        ),
        (vec!["hash-key"], None, vec![], "error: no key given"),
        (
            vec!["hash-key", "-"],
            Some(b"cura_s3cret\n\n"),
            vec![],
            not_ascii,
        ),
        (
            vec!["hash-key", "cura_\u{fc}n\u{ef}code_\u{1f511}"],
            None,
            vec![],
            not_ascii,
        ),
        (
            vec!["hash-key"],
            Some(b"cura_s3cret \n"),
            vec![],
            "error: the key starts or ends with a space or tab",
        ),
    ];
    let mut failures = Vec::new();
    for (args, stdin, env, says) in &cases {
        let out = run(args, *stdin, env).await;
        if out.code != Some(2) || !out.stdout.is_empty() || !out.stderr.starts_with(says) {
            failures.push(format!(
                "hash-key {args:?} stdin {:?} env {env:?}: exit {:?}, stdout {:?}, stderr {:?}; \
                 expected exit 2 and stderr starting {says:?}",
                stdin.map(String::from_utf8_lossy),
                out.code,
                out.stdout,
                out.stderr
            ));
        }
        if out.stderr.contains("s3cret") {
            failures.push(format!(
                "hash-key {args:?}: the key is quoted back: {:?}",
                out.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
