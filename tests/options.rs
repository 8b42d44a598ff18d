//! The option declarations (`src/app/options.rs`) against everything made
//! from them: the committed options reference (docs/options.md, by
//! `app::reference`) and man
//! page (docs/drainit.1) are regenerated and compared, `drainit --help`
//! shows every option with its variable and default within 100 columns,
//! and every declared default parses with its option's own parser.
//!
//! After changing an option, regenerate both files with
//! `DRAINIT_REGENERATE_DOCS=1 cargo test --test options`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use clap::Parser;
use drainit::app::cli::{self, RawArgs};
use drainit::app::config::{Config, Request};
use drainit::app::options::{self, Kind, Opt, OPTIONS};
use drainit::app::reference;

const DRAINIT: &str = env!("CARGO_BIN_EXE_drainit");
const REGENERATE: &str = "DRAINIT_REGENERATE_DOCS";

/// Compares a generated file with the committed one, or writes it when
/// `DRAINIT_REGENERATE_DOCS` is set.
fn check_generated(relative: &str, generated: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os(REGENERATE).is_some() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == generated {
        return;
    }
    let first_difference = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
    panic!(
        "{relative} is not what the option declarations generate (first difference at line {}:\n\
         committed: {:?}\ngenerated: {:?})\n\
         regenerate it with: {REGENERATE}=1 cargo test --test options",
        first_difference + 1,
        committed
            .lines()
            .nth(first_difference)
            .unwrap_or("<end of file>"),
        generated
            .lines()
            .nth(first_difference)
            .unwrap_or("<end of file>"),
    );
}

#[test]
fn the_options_reference_is_generated_from_the_declarations() {
    check_generated("docs/options.md", &reference::reference());
}

/// `drainit --help` prints a committed text (the binary has no help
/// renderer: clap's `help` feature is on for tests only): clap's rendering
/// of the documented command, kept equal here.
#[test]
fn the_help_is_clap_s_rendering_of_the_command() {
    let rendered = cli::command()
        .help_template(cli::TEMPLATE)
        .render_help()
        .to_string();
    check_generated("src/app/help.txt", &rendered);
}

/// `-h`, `--help` and a help among other flags print that text, on stdout.
#[test]
fn help_prints_the_committed_text() {
    for flags in [
        &["--help"][..],
        &["-h"],
        &["-vh"],
        &["--grace", "3s", "--help"],
    ] {
        let out = Command::new(DRAINIT).args(flags).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flags:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), cli::HELP, "{flags:?}");
        assert!(out.stderr.is_empty(), "{flags:?}");
    }
    // What follows the program is the program's.
    let out = Command::new(DRAINIT)
        .args(["--", "/bin/sh", "-c", "echo \"$1\"", "sh", "--help"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "--help\n");
}

/// The man page: clap_mangen over `cli::command()` for NAME, SYNOPSIS and
/// OPTIONS, the rest from docs/man-sections.roff; with the version
/// without its commit (so the page changes only when the options do),
/// PROGRAM and its ARGS shown as in the usage line (`--help` writes them
/// out itself), and help texts unwrapped (roff fills its own lines).
fn man_page() -> String {
    let cmd = cli::command()
        .version(env!("CARGO_PKG_VERSION"))
        .mut_arg(cli::PROGRAM, |a| {
            a.hide(false)
                .required(true)
                .action(clap::ArgAction::Set)
                .num_args(1)
                .trailing_var_arg(false)
                .help("The program to run")
        })
        .arg(
            clap::Arg::new("args")
                .value_name("ARGS")
                .action(clap::ArgAction::Append)
                .num_args(0..)
                .trailing_var_arg(true)
                .help("Its arguments"),
        )
        .mut_args(|a| match a.get_help().map(|h| h.to_string()) {
            Some(help) => a.help(help.replace('\n', " ")),
            None => a,
        });
    // The hand-written sections (docs/man-sections.roff): DESCRIPTION
    // before the OPTIONS marker, EXIT STATUS to SEE ALSO after it. The
    // generated EXTRA (`--help`'s after-help) and VERSION sections are
    // left out: EXIT STATUS and ENVIRONMENT say it in man page form.
    const SECTIONS: &str = include_str!("../docs/man-sections.roff");
    let (description, rest) = SECTIONS
        .split_once(".\\\" OPTIONS\n")
        .expect("docs/man-sections.roff has the OPTIONS marker line");
    // The file's own comment lines stay out of the page.
    let keep = |part: &str| -> String {
        part.lines()
            .filter(|l| !l.starts_with(".\\\""))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let man = clap_mangen::Man::new(cmd)
        .title("DRAINIT")
        .section("1")
        .source(format!("drainit {}", env!("CARGO_PKG_VERSION")))
        .manual("User Commands");
    let mut out = Vec::new();
    man.render_title(&mut out).unwrap();
    man.render_name_section(&mut out).unwrap();
    man.render_synopsis_section(&mut out).unwrap();
    out.extend_from_slice(keep(description).as_bytes());
    man.render_options_section(&mut out).unwrap();
    out.extend_from_slice(keep(rest).as_bytes());
    String::from_utf8(out).unwrap()
}

#[test]
fn the_man_page_is_generated_from_the_command() {
    check_generated("docs/drainit.1", &man_page());
}

/// The man page (equal to the committed one, see above) misses no option.
#[test]
fn the_man_page_lists_every_option() {
    let page = man_page();
    for opt in OPTIONS {
        // roff writes a dash as \-.
        let long = format!("\\-\\-{}", opt.long.replace('-', "\\-"));
        assert!(page.contains(&long), "the man page lacks --{}", opt.long);
        if let Some(short) = opt.short {
            assert!(
                page.contains(&format!("\\-{short}")),
                "the man page lacks -{short}"
            );
        }
        if let Some(var) = opt.var() {
            assert!(page.contains(&var), "the man page lacks {var}");
        }
    }
    assert!(page.contains("PROGRAM"));
}

fn help() -> String {
    let out = Command::new(DRAINIT).arg("--help").output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The lines `--help` gives the option: its own line and the indented
/// lines that continue its text.
fn help_block<'a>(help: &'a str, opt: &Opt) -> Vec<&'a str> {
    let names = match opt.short {
        Some(short) => format!("-{short}, --{}", opt.long),
        None => format!("--{}", opt.long),
    };
    let lines: Vec<&str> = help.lines().collect();
    let start = lines
        .iter()
        .position(|line| {
            let indent = line.len() - line.trim_start().len();
            line.trim_start()
                .strip_prefix(&names)
                .is_some_and(|rest| rest.starts_with([' ', '.']) || rest.is_empty())
                && indent <= 6
        })
        .unwrap_or_else(|| panic!("--help lacks {names}:\n{help}"));
    let mut block = vec![lines[start]];
    block.extend(
        lines[start + 1..]
            .iter()
            .take_while(|line| line.len() - line.trim_start().len() > 10),
    );
    block
}

#[test]
fn help_shows_every_option_with_its_variable_and_default() {
    let help = help();
    for opt in OPTIONS {
        let block = help_block(&help, opt).join(" ");
        if opt.kind == Kind::Optional {
            assert!(
                block.contains(&format!("--{} [<{}>]", opt.long, opt.value)),
                "{block}"
            );
        } else if !opt.value.is_empty() {
            assert!(
                block.contains(&format!("--{} <{}>", opt.long, opt.value)),
                "{block}"
            );
        }
        match opt.var() {
            Some(var) => assert!(block.contains(&format!("[env: {var}]")), "{block}"),
            None => assert!(!block.contains("[env: "), "{block}"),
        }
        match opt.default_shown() {
            Some(default) => assert!(block.contains(&format!("[default: {default}]")), "{block}"),
            None => assert!(!block.contains("[default: "), "{block}"),
        }
        let first_words: String = opt.help.split(' ').take(4).collect::<Vec<_>>().join(" ");
        assert!(block.contains(&first_words), "{block}");
    }
}

#[test]
fn help_fits_in_100_columns() {
    let help = help();
    let long: Vec<&str> = help
        .lines()
        .filter(|l| l.chars().count() > cli::HELP_COLUMNS)
        .collect();
    assert!(long.is_empty(), "lines over 100 columns: {long:#?}");
}

#[test]
fn no_help_line_but_an_option_line_starts_with_a_dash() {
    // A wrapped text that starts a line with "--drain-exec" would read as
    // an option of its own (to people, and to tests/docs.rs).
    let help = help();
    let odd: Vec<&str> = help
        .lines()
        .filter(|l| l.trim_start().starts_with('-') && l.len() - l.trim_start().len() > 6)
        .collect();
    assert!(odd.is_empty(), "{odd:#?}");
}

#[test]
fn help_names_the_exit_codes_the_docs_and_a_required_program() {
    let help = help();
    for code in [
        "2 usage error",
        "124 deadline",
        "125 drainit failed to start the child",
        "126 PROGRAM not executable",
        "127 PROGRAM not found",
    ] {
        assert!(help.contains(code), "--help lacks {code:?}");
    }
    assert!(help.contains("docs/") && help.contains("README"));
    assert!(help.contains("Usage: drainit [OPTIONS] [--] PROGRAM [ARGS]..."));
    assert!(!help.contains("[PROGRAM]"), "PROGRAM shown as optional");
}

#[test]
fn the_declarations_are_consistent() {
    for (i, opt) in OPTIONS.iter().enumerate() {
        let later = &OPTIONS[i + 1..];
        assert!(
            later.iter().all(|o| o.long != opt.long),
            "--{} twice",
            opt.long
        );
        if let Some(short) = opt.short {
            assert!(
                later.iter().all(|o| o.short != Some(short)),
                "-{short} twice"
            );
        }
        let takes_value = matches!(
            opt.kind,
            Kind::One | Kind::Commas | Kind::Lines | Kind::Optional
        );
        assert_eq!(takes_value, !opt.value.is_empty(), "--{}", opt.long);
        if !takes_value {
            assert!(opt.default_value().is_none(), "--{}", opt.long);
        }
        assert!(!opt.help.is_empty() && !opt.help.ends_with('.'));
        assert_eq!(options::find(opt.long).map(|o| o.long), Some(opt.long));
    }
    assert_eq!(options::env_var("pre-stop-delay"), "DRAINIT_PRE_STOP_DELAY");
}

/// With ECS metadata, task protection and a drain URL on, every option is
/// read, so every default is parsed.
const ALL_ON: [(&str, &str); 4] = [
    ("ECS_CONTAINER_METADATA_URI_V4", "http://127.0.0.1:1/v4"),
    ("ECS_AGENT_URI", "http://127.0.0.1:1/api"),
    ("DRAINIT_ECS_PROTECT", "1"),
    ("DRAINIT_DRAIN_URL", "http://127.0.0.1:1/d"),
];

fn config(args: &[&str], vars: &[(&str, &str)]) -> Result<Config, String> {
    let raw = RawArgs::try_parse_from(["drainit"].iter().chain(args).chain(&["x"]))
        .map_err(|e| e.to_string())?;
    let lookup = |name: &str| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| OsString::from(v))
    };
    match Config::from_raw(raw, &lookup).map_err(|e| e.0)? {
        Request::Run(config) => Ok(*config),
        Request::License => Err("license".into()),
        Request::Probe(_) => Err("probe".into()),
        Request::Check(_) => Err("check".into()),
    }
}

#[test]
fn every_declared_default_parses_with_its_own_option_parser() {
    // Nothing given: every default was parsed from its declaration. The
    // grace's declared default is the one off ECS and Kubernetes (on them
    // it is longer, and said at start): checked with no platform.
    let no_platform: Vec<(&str, &str)> = ALL_ON
        .iter()
        .copied()
        .filter(|(k, _)| k.starts_with("DRAINIT_DRAIN"))
        .collect();
    let mut checked = 0;
    for opt in OPTIONS {
        let Some(default) = opt.default_value() else {
            continue;
        };
        let env: &[(&str, &str)] = if opt.long == "grace" {
            &no_platform
        } else {
            &ALL_ON
        };
        let without_notices = |mut c: Config| {
            c.notices.clear();
            c
        };
        let base = without_notices(config(&[], env).expect("the declared defaults parse"));
        // Typed as the flag: the same parser, the same value.
        let flag = format!("--{}", opt.long);
        let typed = config(&[&flag, default], env)
            .unwrap_or_else(|e| panic!("{flag} {default} (its default): {e}"));
        assert_eq!(
            without_notices(typed),
            base,
            "{flag} {default} is not the default"
        );
        // And as the variable.
        // --probe-timeout: read only by --probe, which reads no variable.
        let Some(var) = opt.var() else { continue };
        let mut vars: Vec<(&str, &str)> = env.iter().copied().filter(|(k, _)| *k != var).collect();
        vars.push((&var, default));
        let from_var = config(&[], &vars).unwrap_or_else(|e| panic!("{var}={default}: {e}"));
        assert_eq!(
            without_notices(from_var),
            base,
            "{var}={default} is not the default"
        );
        checked += 1;
    }
    assert!(checked >= 17, "only {checked} defaults checked");
}

// Mistakes that speak up at start, on the real binary: the line is the
// outcome here, and the run still does what it was asked.

mod support;

use support::{assert_usage_error, drainit as launch, path_str, Scratch};

/// Runs the (real) binary under `name` with `vars`, `flags` and a child
/// that exits 3; returns the exit code and drainit's stderr.
fn run_as(name: &str, flags: &[&str], vars: &[(&str, &str)]) -> (i32, String) {
    let scratch = Scratch::new("speak-up");
    let binary = scratch.file(name);
    std::os::unix::fs::symlink(DRAINIT, &binary).unwrap();
    let mut run = launch(flags.iter().chain(&["sh", "-c", "exit 3"]))
        .binary(path_str(&binary))
        .not_pid1();
    for (k, v) in vars {
        run = run.env(k, v);
    }
    run.run()
}

/// The `unknown variable` warnings in `stderr`.
fn unknown_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("unknown variable"))
        .collect()
}

#[test]
fn an_unknown_drainit_variable_is_one_warning_naming_the_nearest() {
    let (code, stderr) = run_as(
        "drainit",
        &[],
        &[("DRAINIT_DRAIN_ULR", "http://127.0.0.1:1/drain")],
    );
    assert_eq!(code, 3, "the run goes on: {stderr}");
    let lines = unknown_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("DRAINIT_DRAIN_ULR") && lines[0].contains("DRAINIT_DRAIN_URL"),
        "{stderr}"
    );
    let (code, stderr) = run_as("drainit", &[], &[("DRAINIT_GRAC", "3s")]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        unknown_lines(&stderr)
            .iter()
            .any(|l| l.contains("DRAINIT_GRAC ") && l.contains("DRAINIT_GRACE)")),
        "{stderr}"
    );
}

#[test]
fn drainits_own_variables_are_not_unknown() {
    // Options' variables, variables without an option, the test suite's.
    let (code, stderr) = run_as(
        "drainit",
        &[],
        &[
            ("DRAINIT_GRACE", "5s"),
            ("DRAINIT_WARN_ON_REAP", "1"),
            ("DRAINIT_VERBOSITY", "1"),
            ("DRAINIT_LOG", "warn"),
            ("DRAINIT_REQUIRE_DOCKER", "0"),
            ("DRAINIT_REGENERATE_DOCS", ""),
            ("TINI_SUBREAPR", "1"),
            ("DUMB_INIT_SETSIT", "1"),
        ],
    );
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(unknown_lines(&stderr), Vec::<&str>::new(), "{stderr}");
}

#[test]
fn called_tini_or_dumb_init_their_unknown_variables_are_said_too() {
    let real = [
        ("TINI_SUBREAPER", "1"),
        ("TINI_VERBOSITY", "1"),
        ("TINI_KILL_PROCESS_GROUP", "1"),
        ("DUMB_INIT_SETSID", "0"),
        ("DUMB_INIT_DEBUG", "1"),
    ];
    for name in ["tini", "tini-static"] {
        let mut vars = real.to_vec();
        vars.push(("TINI_SUBREAPR", "1"));
        let (code, stderr) = run_as(name, &[], &vars);
        assert_eq!(code, 3, "{name}: {stderr}");
        let lines = unknown_lines(&stderr);
        assert_eq!(lines.len(), 1, "{name}: {stderr}");
        assert!(
            lines[0].contains("TINI_SUBREAPR ") && lines[0].contains("TINI_SUBREAPER"),
            "{name}: {stderr}"
        );
    }
    let mut vars = real.to_vec();
    vars.push(("DUMB_INIT_SETSIT", "1"));
    let (code, stderr) = run_as("dumb-init", &[], &vars);
    assert_eq!(code, 3, "{stderr}");
    let lines = unknown_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("DUMB_INIT_SETSID"), "{stderr}");
}

#[test]
fn unknown_variables_are_said_at_most_eight_times() {
    let names: Vec<String> = (0..20).map(|i| format!("DRAINIT_NO_SUCH_{i:02}")).collect();
    let vars: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "1")).collect();
    let (code, stderr) = run_as("drainit", &[], &vars);
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(unknown_lines(&stderr).len(), 9, "8 and one count: {stderr}");
    assert!(stderr.contains("12 more unknown variables"), "{stderr}");
}

#[test]
fn a_flag_that_beats_its_variable_is_one_info_line_naming_both() {
    // -v shows INFO; the flag's value is the one used (a bad variable
    // beaten by its flag is never parsed, so it cannot stop the run).
    let (code, stderr) = run_as(
        "drainit",
        &["-v", "--grace", "3s", "--log-format", "text"],
        &[
            ("DRAINIT_GRACE", "not a duration"),
            ("DRAINIT_LOG_FORMAT", "text"),
        ],
    );
    assert_eq!(code, 3, "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("INFO") && l.contains("overrides"))
        .collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("--grace ") && l.contains("DRAINIT_GRACE ")),
        "{stderr}"
    );
    // No variable set: nothing to say.
    let (code, stderr) = run_as("drainit", &["-v", "--grace", "3s"], &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(!stderr.contains("overrides"), "{stderr}");
}

#[test]
fn a_mistyped_flag_gets_the_nearest_option() {
    assert_usage_error(&["--grace-period", "20s"], &[], "did you mean --grace?");
    assert_usage_error(
        &["--drain-ulr", "http://a/"],
        &[],
        "did you mean --drain-url?",
    );
    // Nothing near: no guess.
    let (code, stderr) = launch(["--zzzzzz", "true"]).not_pid1().run();
    assert_eq!(code, 2, "{stderr}");
    assert!(!stderr.contains("did you mean"), "{stderr}");
}

#[test]
fn a_port_alone_for_serve_says_to_write_colon_port() {
    assert_usage_error(&["--serve", "9090"], &[], "write :9090");
    assert_usage_error(&[], &[("DRAINIT_SERVE", "9090")], "write :9090");
}

/// Every read of an option in `src/app/` goes through the accessor its
/// `Kind` calls for: a switch is read with `flag`, a count with `count`,
/// one value with `value`/`value_or_default`, a repeatable one with
/// `values`/`list`. The constants make a misspelt option a compile error;
/// this makes a mismatched accessor (which clap would answer with a panic
/// when the line runs) a test failure.
#[test]
fn every_option_is_read_by_the_accessor_its_kind_calls_for() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/app");
    let mut files = vec![];
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let accessors: &[(&str, &[Kind])] = &[
        (".flag(&options::", &[Kind::Flag]),
        (".count(&options::", &[Kind::Count]),
        (".value(&options::", &[Kind::One, Kind::Optional]),
        (".value_or_default(&options::", &[Kind::One]),
        (".values(&options::", &[Kind::Commas, Kind::Lines]),
        (".list(&options::", &[Kind::Commas, Kind::Lines]),
    ];
    let mut reads = 0;
    let mut wrong = vec![];
    for file in &files {
        // One call may be split over lines by rustfmt: join them.
        let text = std::fs::read_to_string(file)
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("");
        for (call, kinds) in accessors {
            let call = call.replace(' ', "");
            for (at, _) in text.match_indices(&call) {
                let rest = &text[at + call.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                let long = name.to_lowercase().replace('_', "-");
                let opt: &Opt = OPTIONS
                    .iter()
                    .copied()
                    .find(|o| o.long == long)
                    .unwrap_or_else(|| panic!("{}: no option {name}", file.display()));
                reads += 1;
                if !kinds.contains(&opt.kind) {
                    wrong.push(format!(
                        "{}: {call}{name} but --{} is {:?}",
                        file.display(),
                        opt.long,
                        opt.kind
                    ));
                }
            }
        }
    }
    assert!(
        reads >= 30,
        "only {reads} option reads found: the scan is broken"
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}
