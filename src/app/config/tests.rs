//! The configuration's unit tests: every option, its variable and its
//! default, and the rules that span several options.

use super::*;
use crate::app::cli;
use crate::app::options;
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

/// The grace period when a drain option is set and `--grace` is not
/// (declared in `app::options`; pinned here).
/// The default grace off ECS and Kubernetes, and on them.
const DEFAULT_GRACE: Duration = Duration::from_secs(8);
const PLATFORM: Duration = Duration::from_secs(25);
use std::collections::HashMap;

fn parse_with(args: &[&str], vars: &[(&str, &str)]) -> Result<Config, UsageError> {
    let raw = RawArgs::try_parse_from(std::iter::once("drainit").chain(args.iter().copied()))
        .map_err(|e| UsageError(e.to_string()))?;
    let vars: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    match Config::from_raw(raw, &|name| vars.get(name).cloned())? {
        Request::Run(config) => Ok(*config),
        Request::License => Err(UsageError("license".into())),
        Request::Probe(_) => Err(UsageError("probe".into())),
        Request::Check(_) => Err(UsageError("check".into())),
    }
}

fn parse(args: &[&str]) -> Config {
    parse_with(args, &[]).expect("valid arguments")
}

#[test]
fn durations_in_every_form() {
    let cases = [
        ("500ms", 500),
        ("20s", 20_000),
        ("2m", 120_000),
        ("20", 20_000),
        ("0", 0),
        ("0s", 0),
        ("1.5s", 1_500),
        ("0.25", 250),
        ("1.5m", 90_000),
        ("0.5ms", 0),
        (" 3s ", 3_000),
        ("007", 7_000),
    ];
    for (text, ms) in cases {
        assert_eq!(
            parse_duration(text).map(|d| d.as_millis()),
            Ok(ms),
            "{text}"
        );
    }
}

#[test]
fn durations_reject_garbage() {
    for text in [
        "",
        "abc",
        "s",
        "ms",
        "-1",
        "-1s",
        "1h",
        "1d",
        "1 s",
        "1e3",
        "1.2.3",
        ".",
        "1,5",
        "inf",
        "NaN",
        "+5",
        "20S",
        "5sec",
        "10us",
        "99999999999999999999m",
        "∞",
    ] {
        assert!(parse_duration(text).is_err(), "{text:?} should be rejected");
    }
}

#[test]
fn exit_codes_in_range_only() {
    for n in 0..=255u16 {
        assert_eq!(parse_exit_code(&n.to_string()), Ok(n as u8));
    }
    for text in ["256", "-1", "", "x", "1.0", "+1", "0x10"] {
        assert!(parse_exit_code(text).is_err(), "{text:?}");
    }
}

#[test]
fn rewrite_pairs() {
    assert_eq!(parse_rewrite("TERM:QUIT"), Ok((15, 3)));
    assert_eq!(parse_rewrite("15:0"), Ok((15, 0)));
    assert_eq!(parse_rewrite("sigint:SIGTERM"), Ok((2, 15)));
    // Any forwarded signal is a source, fault and job-control ones too.
    assert_eq!(parse_rewrite("SEGV:TERM"), Ok((11, 15)));
    assert_eq!(parse_rewrite("TTIN:HUP"), Ok((21, 1)));
    for text in [
        "TERM",
        "TERM:",
        ":QUIT",
        "TERM:BOGUS",
        "CHLD:TERM",
        "KILL:TERM",
        "STOP:TERM",
        "TERM:QUIT:HUP",
    ] {
        assert!(parse_rewrite(text).is_err(), "{text:?}");
    }
}

#[test]
fn option_parsing_stops_at_first_word() {
    let c = parse(&["-v", "ls", "-l", "-v", "--", "x"]);
    assert_eq!(c.program, "ls");
    assert_eq!(c.args, ["-l", "-v", "--", "x"]);
    assert_eq!(c.verbosity, 2);
    let c = parse(&["--", "-weird-name", "-s"]);
    assert_eq!(c.program, "-weird-name");
    assert_eq!(c.args, ["-s"]);
    assert!(!c.subreaper);
}

#[test]
fn tini_flags() {
    let c = parse(&[
        "-s", "-g", "-w", "-vvv", "-p", "SIGKILL", "-e", "143", "-e", "1", "true",
    ]);
    assert!(c.subreaper && c.kill_process_group && c.warn_on_reap);
    assert_eq!(c.verbosity, 4);
    assert_eq!(c.pdeathsig, Some(9));
    assert_eq!(c.remap_exit, [143, 1]);
    assert_eq!(c.program, "true");
}

#[test]
fn tini_variables() {
    let c = parse_with(
        &["-vv", "x"],
        &[
            ("TINI_SUBREAPER", ""),
            ("TINI_KILL_PROCESS_GROUP", "0"),
            ("TINI_VERBOSITY", "0"),
        ],
    )
    .unwrap();
    assert!(c.subreaper, "TINI_SUBREAPER switches on when set at all");
    assert!(c.kill_process_group, "even to 0, as in tini");
    assert_eq!(c.verbosity, 0, "TINI_VERBOSITY replaces the -v count");
    assert!(parse_with(&["x"], &[("TINI_VERBOSITY", "loud")])
        .unwrap_err()
        .0
        .contains("TINI_VERBOSITY"));
}

#[test]
fn drainit_variables_and_flag_precedence() {
    let vars = [
        ("DRAINIT_SUBREAPER", "yes"),
        ("DRAINIT_KILL_PROCESS_GROUP", "0"),
        ("DRAINIT_PDEATHSIG", "HUP"),
        ("DRAINIT_REMAP_EXIT", "3, 4"),
        ("DRAINIT_REWRITE", "TERM:QUIT,HUP:0"),
        ("DRAINIT_VERBOSITY", "3"),
    ];
    let c = parse_with(&["x"], &vars).unwrap();
    assert!(c.subreaper);
    assert!(!c.kill_process_group);
    assert_eq!(c.pdeathsig, Some(libc::SIGHUP));
    assert_eq!(c.remap_exit, [3, 4]);
    assert_eq!(c.rewrite, [(15, 3), (1, 0)]);
    assert_eq!(c.verbosity, 3);
    let c = parse_with(
        &["-p", "USR1", "-e", "9", "-r", "INT:TERM", "-v", "x"],
        &vars,
    )
    .unwrap();
    assert_eq!(
        c.pdeathsig,
        Some(libc::SIGUSR1),
        "a flag beats its variable"
    );
    assert_eq!(c.remap_exit, [9]);
    assert_eq!(c.rewrite, [(2, 15)]);
    assert_eq!(c.verbosity, 2);
    let c = parse_with(&["x"], &[("DRAINIT_PDEATHSIG", "")]).unwrap();
    assert_eq!(c.pdeathsig, None, "empty means unset");
}

#[test]
fn bad_values_name_the_option_in_one_line() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 8] = [
        (&["-e", "256", "x"], &[], "--remap-exit"),
        (&["-p", "NOPE", "x"], &[], "--pdeathsig"),
        (&["-r", "TERM", "x"], &[], "--rewrite"),
        (
            &["x"],
            &[("DRAINIT_REMAP_EXIT", "1,x")],
            "DRAINIT_REMAP_EXIT",
        ),
        (
            &["x"],
            &[("DRAINIT_SUBREAPER", "maybe")],
            "DRAINIT_SUBREAPER",
        ),
        (&["x"], &[("DRAINIT_PDEATHSIG", "0")], "DRAINIT_PDEATHSIG"),
        (&["x"], &[("DRAINIT_VERBOSITY", "-1")], "DRAINIT_VERBOSITY"),
        (&[], &[], "PROGRAM"),
    ];
    for (args, vars, needle) in cases {
        let err = parse_with(args, vars).unwrap_err().0;
        assert!(err.contains(needle), "{err:?} should name {needle}");
        assert!(!err.contains('\n'), "{err:?} should be one line");
    }
}

#[test]
fn drain_defaults() {
    let c = parse(&["x"]);
    assert_eq!(
        c.timeline.grace, None,
        "no drain option: tini behaviour, no deadline"
    );
    assert_eq!(c.verbosity, 1);
    assert_eq!(c.timeline.stop_signals, [libc::SIGTERM, libc::SIGINT]);
    assert_eq!(c.drain_field, "/readyForTermination");
    assert_eq!(c.timeline.drain_interval, Duration::from_secs(1));
    assert_eq!(c.timeline.ready_grace, Duration::from_secs(2));
    assert_eq!(c.timeline.orphan_grace, Duration::ZERO);
    assert_eq!(c.deadline_exit_code, 124);
    assert_eq!(c.log_format, LogFormat::Text);
    let c = parse(&["--drain-url", "http://127.0.0.1:1/d", "x"]);
    assert_eq!(c.timeline.grace, Some(DEFAULT_GRACE));
    assert_eq!(c.verbosity, 2, "drain progress is shown by default");
    let c = parse(&["--stop-url", "http://127.0.0.1:1/s", "x"]);
    assert_eq!(c.timeline.grace, Some(DEFAULT_GRACE));
    assert_eq!(c.stop_hooks[0].method.as_str(), "POST");
    let c = parse(&["--pre-stop-delay", "5s", "x"]);
    assert_eq!(c.timeline.grace, Some(DEFAULT_GRACE));
}

#[test]
fn grace_forms() {
    let url = "http://127.0.0.1:1/d";
    for (text, want) in [
        ("none", None),
        ("NONE", None),
        ("0", None),
        ("0s", None),
        ("20s", Some(20_000)),
        ("500ms", Some(500)),
        ("2m", Some(120_000)),
        ("90", Some(90_000)),
    ] {
        let c = parse(&["--grace", text, "--drain-url", url, "x"]);
        assert_eq!(
            c.timeline.grace.map(|g| g.as_millis() as u64),
            want,
            "{text}"
        );
    }
    let c = parse_with(&["--drain-url", url, "x"], &[("DRAINIT_GRACE", "10s")]).unwrap();
    assert_eq!(c.timeline.grace, Some(Duration::from_secs(10)));
    let c = parse_with(&["--grace", "3s", "x"], &[("DRAINIT_GRACE", "10s")]).unwrap();
    assert_eq!(
        c.timeline.grace,
        Some(Duration::from_secs(3)),
        "flag beats variable"
    );
}

#[test]
fn drain_options_from_the_environment() {
    let vars = [
        ("DRAINIT_DRAIN_URL", "http://127.0.0.1:9/drain"),
        ("DRAINIT_DRAIN_FIELD", "/a/b"),
        ("DRAINIT_DRAIN_INTERVAL", "250ms"),
        ("DRAINIT_STOP_SIGNALS", "sigterm,QUIT"),
        ("DRAINIT_STOP_URL", "http://127.0.0.1:9/stop"),
        ("DRAINIT_STOP_METHOD", "delete"),
        ("DRAINIT_READY_GRACE", "0"),
        ("DRAINIT_ORPHAN_GRACE", "3s"),
        ("DRAINIT_PRE_STOP_DELAY", "1"),
        ("DRAINIT_DEADLINE_EXIT_CODE", "75"),
        ("DRAINIT_EXIT_REPORT", "/dev/termination-log"),
        ("DRAINIT_LOG_FORMAT", "JSON"),
    ];
    let c = parse_with(&["x"], &vars).unwrap();
    assert_eq!(c.drain_urls, ["http://127.0.0.1:9/drain"]);
    assert_eq!(c.drain_field, "/a/b");
    assert_eq!(c.timeline.drain_interval, Duration::from_millis(250));
    assert_eq!(c.timeline.stop_signals, [libc::SIGTERM, libc::SIGQUIT]);
    assert_eq!(c.stop_hooks[0].method.as_str(), "DELETE");
    assert_eq!(c.timeline.ready_grace, Duration::ZERO);
    assert_eq!(c.timeline.orphan_grace, Duration::from_secs(3));
    assert_eq!(c.timeline.pre_stop_delay, Duration::from_secs(1));
    assert_eq!(c.deadline_exit_code, 75);
    assert_eq!(
        c.exit_report.as_deref(),
        Some(std::path::Path::new("/dev/termination-log"))
    );
    assert_eq!(c.log_format, LogFormat::Json);
}

#[test]
fn bad_drain_values_name_their_option() {
    let cases = [
        (vec!["--grace", "abc"], "--grace"),
        (vec!["--drain-url", "https://127.0.0.1/"], "--drain-url"),
        (vec!["--drain-field", "x"], "--drain-field"),
        (vec!["--drain-interval", "0"], "--drain-interval"),
        (vec!["--drain-interval", "0ms"], "--drain-interval"),
        (vec!["--stop-signals", "CHLD"], "--stop-signals"),
        (vec!["--stop-signals", ""], "--stop-signals"),
        (vec!["--stop-method", "PO ST"], "--stop-method"),
        (vec!["--ready-grace", "soon"], "--ready-grace"),
        (vec!["--log-format", "yaml"], "--log-format"),
    ];
    for (mut args, needle) in cases {
        args.push("x");
        let err = parse_with(&args, &[]).unwrap_err().0;
        assert!(err.contains(needle) && !err.contains('\n'), "{err:?}");
    }
}

#[test]
fn ecs_detection() {
    assert_eq!(parse(&["x"]).ecs, None);
    let v4 = [(
        "ECS_CONTAINER_METADATA_URI_V4",
        "http://169.254.170.2/v4/abc",
    )];
    let c = parse_with(&["x"], &v4).unwrap();
    let ecs = c.ecs.clone().unwrap();
    assert_eq!(
        ecs.metadata_uri.as_deref(),
        Some("http://169.254.170.2/v4/abc")
    );
    assert_eq!(ecs.interval, Duration::from_secs(5));
    assert_eq!(ecs.protect, None);
    assert_eq!(
        c.timeline.grace,
        Some(PLATFORM),
        "ECS counts as a drain feature"
    );
    assert_eq!(c.verbosity, 2);
    let v3 = [("ECS_CONTAINER_METADATA_URI", "http://169.254.170.2/v3/abc")];
    let c = parse_with(&["x"], &v3).unwrap();
    assert_eq!(
        c.ecs.unwrap().metadata_uri.as_deref(),
        Some("http://169.254.170.2/v3/abc")
    );
    let both = [v4[0], v3[0]];
    let c = parse_with(&["x"], &both).unwrap();
    assert!(
        c.ecs.unwrap().metadata_uri.unwrap().contains("/v4/"),
        "v4 wins"
    );
    assert_eq!(parse_with(&["--ecs", "off", "x"], &v4).unwrap().ecs, None);
    assert_eq!(
        parse_with(&["x"], &[("DRAINIT_ECS", "off"), v4[0]])
            .unwrap()
            .ecs,
        None
    );
    let c = parse_with(&["--ecs-interval", "1s", "x"], &v4).unwrap();
    assert_eq!(c.ecs.unwrap().interval, Duration::from_secs(1));
}

#[test]
fn ecs_protection_settings() {
    let vars = [("ECS_AGENT_URI", "http://169.254.170.2/api/abc")];
    let c = parse_with(
        &[
            "--ecs-protect",
            "--drain-url",
            "http://127.0.0.1:8080/drain",
            "x",
        ],
        &vars,
    )
    .unwrap();
    let p = c.ecs.unwrap().protect.unwrap();
    assert_eq!(p.agent_uri, "http://169.254.170.2/api/abc");
    assert_eq!(p.interval, Duration::from_secs(10));
    assert_eq!(p.minutes, 60);
    for minutes in ["1", "2880"] {
        let c = parse_with(
            &[
                "--ecs-protect",
                "--protect-minutes",
                minutes,
                "--drain-url",
                "http://127.0.0.1:1/d",
                "x",
            ],
            &vars,
        )
        .unwrap();
        assert_eq!(c.ecs.unwrap().protect.unwrap().minutes.to_string(), minutes);
    }
    for minutes in ["0", "2881", "1.5", "x", ""] {
        let err = parse_with(
            &[
                "--ecs-protect",
                "--protect-minutes",
                minutes,
                "--drain-url",
                "http://127.0.0.1:1/d",
                "x",
            ],
            &vars,
        )
        .unwrap_err();
        assert!(err.0.contains("--protect-minutes"), "{err}");
    }
    let err = parse_with(
        &[
            "--ecs-protect",
            "--ecs",
            "off",
            "--drain-url",
            "http://127.0.0.1:1/d",
            "x",
        ],
        &vars,
    )
    .unwrap_err();
    assert!(err.0.contains("--ecs off"), "{err}");
    let err = parse_with(
        &["--ecs-protect", "--drain-url", "http://127.0.0.1:1/d", "x"],
        &[("ECS_AGENT_URI", "https://x/")],
    )
    .unwrap_err();
    assert!(err.0.contains("ECS_AGENT_URI"), "{err}");
    // Both protections off ECS: the conflict is what is said, not the
    // missing ECS variable.
    let both = [
        "--ecs-protect",
        "--k8s-protect",
        "--drain-url",
        "http://127.0.0.1:1/d",
        "x",
    ];
    let err = parse_with(&both, &[]).unwrap_err();
    assert!(err.0.contains("cannot be used together"), "{err}");
    // --k8s-idle-safe-to-evict writes safe-to-evict, so it must be managed.
    let unmanaged = [
        "--k8s-protect",
        "--k8s-annotations",
        "cost,do-not-disrupt",
        "--k8s-idle-safe-to-evict",
        "--drain-url",
        "http://127.0.0.1:1/d",
        "x",
    ];
    let err = parse_with(&unmanaged, &[]).unwrap_err();
    assert!(
        err.0
            .contains("--k8s-idle-safe-to-evict needs safe-to-evict"),
        "{err}"
    );
    let vars = [
        ("DRAINIT_K8S_IDLE_SAFE_TO_EVICT", "1"),
        ("DRAINIT_K8S_ANNOTATIONS", "cost"),
    ];
    let flags = ["--k8s-protect", "--drain-url", "http://127.0.0.1:1/d", "x"];
    let err = parse_with(&flags, &vars).unwrap_err();
    assert!(err.0.contains("needs safe-to-evict"), "{err}");
    // The platform's variable: a bad one is a warning under auto, and
    // only --ecs on makes it an error.
    for bad in [
        "unix:/x",
        "https://169.254.170.2/v4/abc",
        "garbage",
        "http://[fe80::1%eth0]/v4",
    ] {
        let var = [("ECS_CONTAINER_METADATA_URI_V4", bad)];
        let c = parse_with(&["--drain-url", "http://127.0.0.1:1/d", "x"], &var).unwrap();
        assert_eq!(c.ecs, None, "{bad}");
        assert_eq!(c.timeline.grace, Some(DEFAULT_GRACE), "{bad}: no platform");
        let warnings = c
            .notices
            .iter()
            .filter(|n| matches!(n, Notice::Warn(_)))
            .count();
        assert_eq!(warnings, 1, "{bad}: {:?}", c.notices);
        let err = parse_with(&["--ecs", "on", "x"], &var).unwrap_err();
        assert!(err.0.contains("ECS_CONTAINER_METADATA_URI_V4"), "{err}");
    }
    // Bad values are refused even where protection is off.
    let err = parse_with(&["--protect-minutes", "0", "x"], &[]).unwrap_err();
    assert!(err.0.contains("--protect-minutes"), "{err}");
    let err = parse_with(&["--protect-interval", "zz", "x"], &[]).unwrap_err();
    assert!(err.0.contains("--protect-interval"), "{err}");
    let err = parse_with(&["x"], &[("DRAINIT_PROTECT_MINUTES", "0")]).unwrap_err();
    assert!(err.0.contains("DRAINIT_PROTECT_MINUTES"), "{err}");
}

#[test]
fn rewrite_lookup() {
    let c = parse(&["-r", "TERM:QUIT", "-r", "HUP:0", "x"]);
    assert_eq!(c.rewritten(libc::SIGTERM), Some(libc::SIGQUIT));
    assert_eq!(c.rewritten(libc::SIGHUP), None);
    assert_eq!(c.rewritten(libc::SIGUSR1), Some(libc::SIGUSR1));
}

/// The environment every option can be checked against: ECS metadata
/// and task protection active, so their options are read too.
const ALL_ON: [(&str, &str); 4] = [
    ("ECS_CONTAINER_METADATA_URI_V4", "http://127.0.0.1:1/v4"),
    ("ECS_AGENT_URI", "http://127.0.0.1:1/api"),
    ("DRAINIT_ECS_PROTECT", "1"),
    ("DRAINIT_DRAIN_URL", "http://127.0.0.1:1/d"),
];

/// Every long option that is a setting, with its help text.
fn settings_with_help() -> Vec<(String, String)> {
    cli::command()
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            options::OPTIONS
                .iter()
                .any(|o| o.long == long && o.var)
                .then(|| (long.to_string(), help))
        })
        .collect()
}

#[test]
// Dozens of full parses: minutes under Miri, and no unsafe code in them.
#[cfg_attr(miri, ignore)]
fn every_long_option_has_a_working_variable_listed_in_help() {
    let help = cli::command().render_help().to_string();
    parse_with(&["x"], &ALL_ON).expect("the base environment is valid");
    let options = settings_with_help();
    assert!(options.len() >= 25, "{options:?}");
    for (long, _) in &options {
        let var = options::env_var(long);
        assert!(
            help.contains(&format!("[env: {var}]")),
            "--help does not list {var}"
        );
        let mut env: Vec<(&str, &str)> =
            ALL_ON.iter().copied().filter(|(k, _)| *k != var).collect();
        env.push((&var, "@@"));
        match parse_with(&["x"], &env) {
            Err(e) => assert!(e.0.contains(&var), "{var}=@@ gave {e}"),
            // Any text is a valid path: then it must have arrived.
            Ok(c) if var == "DRAINIT_DRAIN_FILE" => {
                assert_eq!(c.drain_files, [PathBuf::from("@@")])
            }
            Ok(c) => assert_eq!(
                c.exit_report,
                Some(PathBuf::from("@@")),
                "{var} was silently ignored"
            ),
        }
    }
}

#[test]
// Dozens of full parses: minutes under Miri, and no unsafe code in them.
#[cfg_attr(miri, ignore)]
fn every_default_in_help_is_the_default() {
    let base = parse_with(&["x"], &ALL_ON).unwrap();
    let mut checked = 0;
    for (long, help) in settings_with_help() {
        let Some(default) = help
            .split("[default: ")
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .filter(|d| !d.contains(' '))
        else {
            continue;
        };
        let var = options::env_var(&long);
        let mut env: Vec<(&str, &str)> =
            ALL_ON.iter().copied().filter(|(k, _)| *k != var).collect();
        env.push((&var, default));
        let explicit =
            parse_with(&["x"], &env).unwrap_or_else(|e| panic!("{var}={default} from --help: {e}"));
        assert_eq!(
            explicit, base,
            "--{long}: help says the default is {default}"
        );
        checked += 1;
    }
    assert!(checked >= 12, "only {checked} defaults checked");
}

#[test]
fn source_options_and_their_variables() {
    let c = parse(&[
        "--stop-exec",
        "sh -c 'echo a, b'",
        "--drain-exec",
        "true",
        "--drain-exec",
        "false x",
        "--drain-file",
        "/tmp/a",
        "x",
    ]);
    assert_eq!(c.stop_execs[0].argv, ["sh", "-c", "echo a, b"]);
    assert_eq!(c.drain_execs.len(), 2);
    assert_eq!(c.drain_files, [PathBuf::from("/tmp/a")]);
    assert_eq!(c.timeline.hook_timeout, Duration::from_secs(10));
    assert_eq!(c.drain_timeout, Duration::from_secs(5));
    assert_eq!(
        c.timeline.grace,
        Some(DEFAULT_GRACE),
        "a drain source sets the grace"
    );
    let c = parse_with(
        &["x"],
        &[
            ("DRAINIT_DRAIN_EXEC", "true\n\nsh -c 'exit 0, 1'\n"),
            ("DRAINIT_STOP_EXEC", "true"),
            ("DRAINIT_DRAIN_FILE", "/tmp/a, /tmp/b"),
            ("DRAINIT_HOOK_TIMEOUT", "3s"),
        ],
    )
    .unwrap();
    assert_eq!(c.drain_execs[1].argv, ["sh", "-c", "exit 0, 1"]);
    assert_eq!(c.drain_execs.len(), 2, "one command per line");
    assert_eq!(
        c.drain_files,
        [PathBuf::from("/tmp/a"), PathBuf::from("/tmp/b")]
    );
    assert_eq!(c.timeline.hook_timeout, Duration::from_secs(3));
}

#[test]
fn bad_sources_are_usage_errors() {
    for (args, needle) in [
        (&["--stop-exec", "", "x"][..], "--stop-exec"),
        (&["--drain-exec", "sh -c 'x", "x"], "unclosed quote"),
        (
            &["--drain-exec", "no-such-program-drainit", "x"],
            "not found",
        ),
        (&["--drain-exec", "/etc/passwd", "x"], "not an executable"),
        (
            &["--drain-exec", "true", "--drain-exec", "true", "x"],
            "twice",
        ),
        (&["--drain-file", "/a", "--drain-file", "/a", "x"], "twice"),
        (&["--drain-file", " ", "x"], "--drain-file"),
        (&["--hook-timeout", "0", "x"], "--hook-timeout"),
        (&["--drain-timeout", "x", "x"], "--drain-timeout"),
        (
            &[
                "--stop-exec",
                "true",
                "--grace",
                "10s",
                "--hook-timeout",
                "10s",
                "x",
            ],
            "--hook-timeout",
        ),
        (
            &[
                "--stop-exec",
                "true",
                "--grace",
                "10s",
                "--pre-stop-delay",
                "4s",
                "--hook-timeout",
                "6s",
                "x",
            ],
            "--hook-timeout",
        ),
    ] {
        let e = parse_with(args, &[]).unwrap_err();
        assert!(e.0.contains(needle), "{args:?}: {e}");
        assert!(!e.0.contains('\n'), "one line: {e}");
    }
    // No deadline: any hook timeout fits.
    parse(&[
        "--stop-exec",
        "true",
        "--grace",
        "none",
        "--hook-timeout",
        "3600s",
        "x",
    ]);
}

#[test]
fn drainit_verbose_is_read() {
    let c = parse_with(&["x"], &[("DRAINIT_VERBOSE", "3")]).unwrap();
    assert_eq!(c.verbosity, 3);
    let c = parse_with(&["-v", "x"], &[("DRAINIT_VERBOSE", "4")]).unwrap();
    assert_eq!(c.verbosity, 2, "-v beats the variable");
}

#[test]
fn max_runtime_is_a_drain_option_and_never_0_or_none() {
    let c = parse(&["x"]);
    assert_eq!(c.max_runtime, None);
    let c = parse(&["--max-runtime", "90m", "x"]);
    assert_eq!(c.max_runtime, Some(Duration::from_secs(5_400)));
    assert_eq!(c.timeline.grace, Some(DEFAULT_GRACE), "a drain option");
    assert_eq!(c.verbosity, 2);
    let c = parse_with(&["x"], &[("DRAINIT_MAX_RUNTIME", "2.5")]).unwrap();
    assert_eq!(c.max_runtime, Some(Duration::from_millis(2_500)));
    let c = parse(&["--max-runtime", "1s", "--grace", "none", "x"]);
    assert_eq!(c.timeline.grace, None, "a stop with no deadline");
    for bad in ["0", "0ms", "none", "never", "-1"] {
        let e = parse_with(&[&format!("--max-runtime={bad}"), "x"], &[]).unwrap_err();
        assert!(e.0.contains("--max-runtime"), "{bad}: {e}");
    }
}

#[test]
fn notify_options() {
    let c = parse(&["x"]);
    assert_eq!(c.notify, None);
    assert_eq!(c.grace_max, None);
    let c = parse(&["--notify", "x"]);
    let n = c.notify.unwrap();
    assert_eq!((n.socket, n.access), (None, notify::Access::All));
    assert_eq!(
        c.timeline.grace,
        Some(DEFAULT_GRACE),
        "--notify is a drain option"
    );
    assert_eq!(c.grace_max, c.timeline.grace, "grace-max defaults to grace");
    assert_eq!(c.verbosity, 2);
    let c = parse(&["--notify-socket", "/run/n.sock", "x"]);
    assert_eq!(
        c.notify.unwrap().socket,
        Some(PathBuf::from("/run/n.sock")),
        "a socket path implies --notify"
    );
    let c = parse(&["--notify-access", "main", "x"]);
    assert_eq!(
        c.notify, None,
        "--notify-access alone does not switch it on"
    );
    let c = parse_with(
        &["x"],
        &[
            ("DRAINIT_NOTIFY", "1"),
            ("DRAINIT_NOTIFY_ACCESS", "main"),
            ("DRAINIT_GRACE", "30s"),
            ("DRAINIT_GRACE_MAX", "110s"),
        ],
    )
    .unwrap();
    assert_eq!(c.notify.unwrap().access, notify::Access::Main);
    assert_eq!(c.grace_max, Some(Duration::from_secs(110)));
    let c = parse(&["--grace", "30s", "--grace-max", "30s", "x"]);
    assert_eq!(c.grace_max, Some(Duration::from_secs(30)), "equal is fine");
    for args in [
        &["--grace", "30s", "--grace-max", "29s", "x"][..],
        &["--grace", "none", "--grace-max", "60s", "x"],
        &["--grace-max", "60s", "x"],
        &["--notify", "--grace-max", "1h", "x"],
    ] {
        let e = parse_with(args, &[]).unwrap_err();
        assert!(e.0.contains("--grace-max"), "{args:?}: {e}");
    }
}

#[test]
fn a_pre_stop_delay_must_end_before_the_deadline() {
    for (delay, grace) in [("2s", "1s"), ("1s", "1s"), ("30s", "25s")] {
        let e = parse_with(&["--pre-stop-delay", delay, "--grace", grace, "x"], &[]).unwrap_err();
        assert!(
            e.0.contains("--pre-stop-delay") && e.0.contains("--grace"),
            "{e}"
        );
    }
    // The default grace a delay switches on counts too.
    assert!(parse_with(&["--pre-stop-delay", "30s", "x"], &[]).is_err());
    let c = parse_with(&["--pre-stop-delay", "30s", "--grace", "none", "x"], &[]).unwrap();
    assert_eq!(c.timeline.grace, None);
    let c = parse_with(&["--pre-stop-delay", "7s", "x"], &[]).unwrap();
    assert_eq!(c.timeline.grace, Some(DEFAULT_GRACE));
    // On Kubernetes the default is longer, and logged with its reason.
    let k8s = [("KUBERNETES_SERVICE_HOST", "10.0.0.1")];
    let c = parse_with(&["--pre-stop-delay", "24s", "x"], &k8s).unwrap();
    assert_eq!(c.timeline.grace, Some(PLATFORM));
    assert!(
        matches!(&c.notices[..], [Notice::Info(n)] if n.contains("25s") && n.contains("Kubernetes")),
        "{:?}",
        c.notices
    );
    // An explicit --grace is said as given, with no default's reason.
    let c = parse_with(&["--pre-stop-delay", "1s", "--grace", "9s", "x"], &k8s).unwrap();
    assert!(
        matches!(&c.notices[..], [Notice::Info(n)] if n.starts_with("--grace 9s: the deadline is 9000 ms") && !n.contains("Kubernetes")),
        "{:?}",
        c.notices
    );
}

#[test]
fn a_comma_in_a_flag_splits_it_as_in_the_variable() {
    let c = parse_with(
        &[
            "--drain-url",
            "http://a/drain,http://b/drain",
            "--drain-file",
            "/x,/y",
            "x",
        ],
        &[],
    )
    .unwrap();
    assert_eq!(c.drain_urls, ["http://a/drain", "http://b/drain"]);
    assert_eq!(c.drain_files.len(), 2);
    let c = parse_with(&["--stop-url", "http://a/s, http://b/s", "x"], &[]).unwrap();
    assert_eq!(c.stop_hooks.len(), 2);
}

#[test]
fn at_most_sixty_four_sources() {
    let urls: Vec<String> = (0..65).map(|i| format!("http://127.0.0.1:1/{i}")).collect();
    let mut args: Vec<&str> = Vec::new();
    for url in &urls[..64] {
        args.extend(["--drain-url", url]);
    }
    args.push("x");
    assert_eq!(parse_with(&args, &[]).unwrap().drain_urls.len(), 64);
    args.pop();
    args.extend(["--drain-file", "/tmp/x", "x"]);
    let err = parse_with(&args, &[]).unwrap_err();
    assert!(err.0.contains("64") && err.0.contains("65"), "{err}");
}

/// The warnings among a run's notices.
fn warnings(c: &Config) -> Vec<&str> {
    c.notices
        .iter()
        .filter_map(|n| match n {
            Notice::Warn(w) => Some(w.as_str()),
            Notice::Info(_) => None,
        })
        .collect()
}

#[test]
fn each_platform_has_its_default_grace_and_says_so() {
    let drain = ["--drain-file", "/tmp/d", "x"];
    let k8s = ("KUBERNETES_SERVICE_HOST", "10.0.0.1");
    for (vars, grace, says) in [
        (&[("FLY_MACHINE_ID", "e28")][..], 4, "on Fly.io, seen from FLY_MACHINE_ID, whose kill_timeout defaults to 5 s; a longer kill_timeout needs a longer --grace"),
        (&[("NOMAD_ALLOC_ID", "5b1")][..], 4, "on Nomad, seen from NOMAD_ALLOC_ID, whose kill_timeout defaults to 5 s; a longer kill_timeout needs a longer --grace"),
        (&[("K_SERVICE", "web")][..], 9, "on Cloud Run, seen from K_SERVICE, which kills 10 s"),
        (&[("CLOUD_RUN_JOB", "j")][..], 9, "on Cloud Run, seen from CLOUD_RUN_JOB"),
        (&[("K_SERVICE", "web"), k8s][..], 25, "(on Kubernetes, whose terminationGracePeriodSeconds defaults to 30 s)"),
        (&[("CONTAINER_APP_NAME", "a"), k8s][..], 25, "on Azure Container Apps, seen from CONTAINER_APP_NAME, whose terminationGracePeriodSeconds defaults to 30 s; a longer terminationGracePeriodSeconds needs a longer --grace"),
        (&[("CONTAINER_APP_JOB_NAME", "j"), k8s][..], 25, "on Azure Container Apps, seen from CONTAINER_APP_JOB_NAME"),
        (&[][..], 8, "(no platform with a known kill here; docker stop waits 10 s)"),
    ] {
        let c = parse_with(&drain, vars).unwrap();
        assert_eq!(c.timeline.grace, Some(Duration::from_secs(grace)), "{vars:?}");
        assert!(!c.timeline.delay_gives_way, "{vars:?}");
        let line = format!("--grace {grace}s by default (");
        assert!(
            matches!(&c.notices[..], [Notice::Info(n)] if n.starts_with(&line) && n.contains(says)),
            "{vars:?}: {:?}",
            c.notices
        );
    }
    // Without a drain option: no grace, whatever the platform.
    let c = parse_with(&["x"], &[("FLY_MACHINE_ID", "e28")]).unwrap();
    assert_eq!((c.timeline.grace, c.notices.len()), (None, 0));
}

#[test]
fn a_platform_default_inside_the_delay_is_kept_and_cuts_it() {
    let fly = [("FLY_MACHINE_ID", "e28")];
    let c = parse_with(&["--pre-stop-delay", "5s", "x"], &fly).unwrap();
    assert_eq!(c.timeline.grace, Some(Duration::from_secs(4)));
    assert!(c.timeline.delay_gives_way);
    assert_eq!(
        warnings(&c),
        ["the default --grace (4000 ms) on Fly.io (FLY_MACHINE_ID is set) is not longer than --pre-stop-delay (5000 ms): it is kept, and a stop cuts the delay to at most half of the grace (a hook gets at most half of what is left); set --grace to choose it yourself"]
    );
    // The delay plus an explicit hook timeout, on Nomad.
    let flags = [
        "--pre-stop-delay",
        "2s",
        "--hook-timeout",
        "2s",
        "--stop-url",
        "http://127.0.0.1:1/s",
        "x",
    ];
    let c = parse_with(&flags, &[("NOMAD_ALLOC_ID", "5b1")]).unwrap();
    assert!(c.timeline.delay_gives_way);
    let w = warnings(&c);
    assert!(
        w.len() == 1
            && w[0].contains("on Nomad")
            && w[0].contains("--pre-stop-delay (2000 ms) + --hook-timeout (2000 ms)"),
        "{w:?}"
    );
    // The same on Kubernetes' 25 s default.
    let k8s = [("KUBERNETES_SERVICE_HOST", "10.0.0.1")];
    let c = parse_with(&["--pre-stop-delay", "30s", "x"], &k8s).unwrap();
    assert!(c.timeline.delay_gives_way && warnings(&c)[0].contains("on Kubernetes is not"));
    // A delay that fits keeps the delay whole.
    let c = parse_with(&["--pre-stop-delay", "3s", "x"], &fly).unwrap();
    assert!(!c.timeline.delay_gives_way && warnings(&c).is_empty());
    // A grace given is the operator's: still a usage error.
    let e = parse_with(&["--pre-stop-delay", "5s", "--grace", "4s", "x"], &fly).unwrap_err();
    assert!(e.0.contains("must be shorter than --grace"), "{e}");
    // drainit's own default, with no platform: still a usage error.
    assert!(parse_with(&["--pre-stop-delay", "8s", "x"], &[]).is_err());
}

#[test]
fn kubernetes_options_on_container_apps_are_one_warning() {
    let aca = [
        ("CONTAINER_APP_NAME", "web"),
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
        ("DRAINIT_K8S_COST", "5"),
    ];
    let flags = ["--k8s-protect", "--drain-url", "http://127.0.0.1:1/d", "x"];
    let c = parse_with(&flags, &aca).unwrap();
    assert_eq!(c.k8s, None);
    assert_eq!(c.timeline.grace, Some(PLATFORM));
    assert_eq!(
        warnings(&c),
        ["--k8s-protect, --k8s-cost ignored on Azure Container Apps (CONTAINER_APP_NAME is set): it sets KUBERNETES_* but gives the app no access to the Kubernetes API that holds its pod; Kubernetes pod protection is off"]
    );
    assert!(
        c.notices.iter().all(|n| !matches!(n, Notice::Info(i) if i.contains("on Kubernetes") || i.contains("--k8s-protect"))),
        "{:?}",
        c.notices
    );
    // Nothing given, nothing said; a bad value is still a usage error.
    let c = parse_with(&["x"], &aca[..2]).unwrap();
    assert!(warnings(&c).is_empty(), "{:?}", c.notices);
    assert!(parse_with(&["--k8s-cost", "0", "x"], &aca[..2]).is_err());
}
