//! The documentation stays true to the binary.
//!
//! - Every command line in `README.md` and `docs/**/*.md` that runs drainit
//!   is accepted by drainit's own parser: shell lines (`drainit …`,
//!   `/drainit …`, `target/release/drainit …`, also behind `timeout` or
//!   `unshare`), JSON argument arrays (`ENTRYPOINT ["/drainit", …]`, ECS
//!   `entryPoint`, a pod's `command`; in code blocks and in the prose), and the `DRAINIT_*` variables of
//!   `docker run -e` lines and Dockerfile `ENV` lines. Each is run with the
//!   same options, the program replaced by `/bin/true`, in an environment
//!   cleared of everything but `PATH` and what the example itself sets; it
//!   must not end in a usage error (exit 2, a `drainit:` line).
//! - README.md stays a front door: under 12 KB, the ECS recipe within its
//!   first 200 lines, the test command literally `cargo test --no-fail-fast`
//!   (every target runs, also after one fails), and `.ci/run` runs the
//!   same command.
//! - Relative links (and their `#anchors`) resolve; the options reference
//!   names every option `--help` lists; no page speaks of how the project
//!   was built.
//! - The man page has NAME to SEE ALSO, groff reads it without a warning,
//!   and its EXAMPLES' command lines parse.
//!
//! Needs no network (the ECS and Kubernetes variables some examples need
//! point at a closed port on 127.0.0.1), and root only for the
//! `--k8s-protect` lines (the pod's service-account directory is mounted
//! for them in a mount namespace of their own).

mod support;

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_drainit");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Command lines skipped on purpose, as (a substring of the line, why).
/// Keep it minimal: an entry that matches no line fails the test.
const ALLOWLIST: &[(&str, &str)] = &[];

/// Words a command may be wrapped in before the drainit binary.
const WRAPPERS: &[&str] = &["timeout", "unshare", "exec", "nohup", "env"];

/// Options whose value is a path drainit creates: rewritten into a temp dir.
const CREATES_FILE: &[&str] = &["--exit-report", "--notify-socket"];
const CREATES_FILE_VARS: &[&str] = &["DRAINIT_EXIT_REPORT", "DRAINIT_NOTIFY_SOCKET"];

/// Options whose value is a command drainit checks on `PATH` at start.
const COMMANDS: &[&str] = &["--stop-exec", "--drain-exec"];
const COMMAND_VARS: &[&str] = &["DRAINIT_STOP_EXEC", "DRAINIT_DRAIN_EXEC"];

/// One markdown file: its path relative to the repository and its lines.
struct Doc {
    name: String,
    path: PathBuf,
    text: String,
}

fn docs() -> Vec<Doc> {
    let root = Path::new(ROOT);
    let mut paths = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| Doc {
            name: path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string(),
            text: std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            path,
        })
        .collect()
}

/// A fenced code block: its info string and its lines with their numbers.
struct Block {
    info: String,
    lines: Vec<(usize, String)>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, Block)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        match (&mut open, fence) {
            (None, Some(f)) => {
                let info = trimmed.trim_start_matches(&f[..1]).trim().to_string();
                open = Some((
                    f.to_string(),
                    Block {
                        info,
                        lines: Vec::new(),
                    },
                ));
            }
            (Some((f, _)), Some(g)) if *f == g && trimmed.trim_end() == f.as_str() => {
                out.push(open.take().unwrap().1);
            }
            (Some((_, block)), _) => block.lines.push((i + 1, line.to_string())),
            (None, None) => {}
        }
    }
    out
}

/// A line split into simple commands with shell quoting rules. Each word
/// says whether it held an unquoted `$` (an expansion the test cannot
/// resolve).
fn shell_commands(line: &str) -> Vec<Vec<(String, bool)>> {
    let mut commands = Vec::new();
    let mut words: Vec<(String, bool)> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut dynamic = false;
    let mut chars = line.chars().peekable();
    let end_word = |words: &mut Vec<(String, bool)>,
                    word: &mut String,
                    in_word: &mut bool,
                    dynamic: &mut bool| {
        if *in_word {
            words.push((std::mem::take(word), *dynamic));
        }
        *in_word = false;
        *dynamic = false;
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                            word.push(chars.next().unwrap());
                        }
                        '$' | '`' => {
                            dynamic = true;
                            word.push(c);
                        }
                        _ => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            '#' if !in_word => break,
            ';' | '&' | '|' => {
                end_word(&mut words, &mut word, &mut in_word, &mut dynamic);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut words, &mut word, &mut in_word, &mut dynamic),
            '$' | '`' => {
                in_word = true;
                dynamic = true;
                word.push(c);
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word, &mut dynamic);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

fn is_drainit(word: &str) -> bool {
    word.rsplit('/').next() == Some("drainit")
}

fn is_assignment(word: &str) -> Option<(String, String)> {
    let (name, value) = word.split_once('=')?;
    let valid = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    valid.then(|| (name.to_string(), value.to_string()))
}

/// Variables an example may pass on to drainit.
fn passed_on(name: &str) -> bool {
    ["DRAINIT_", "TINI_", "DUMB_INIT_"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// One drainit run a document shows.
#[derive(Debug)]
struct Invocation {
    at: String,
    line: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    dynamic: bool,
}

/// The JSON string arrays in `text` that start with the drainit binary,
/// from `[` to its `]`, with where each begins; `text` may span several
/// lines of a block.
fn json_arrays(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'[' {
            let rest = text[i + 1..].trim_start();
            if rest.starts_with('"') {
                // Find the matching `]`, outside strings.
                let mut in_string = false;
                let mut escaped = false;
                let mut end = None;
                for (j, &b) in bytes.iter().enumerate().skip(i + 1) {
                    match (in_string, escaped, b) {
                        (true, true, _) => escaped = false,
                        (true, false, b'\\') => escaped = true,
                        (true, false, b'"') => in_string = false,
                        (false, _, b'"') => in_string = true,
                        (false, _, b']') => {
                            end = Some(j);
                            break;
                        }
                        _ => {}
                    }
                }
                if let Some(end) = end {
                    if let Ok(array) = serde_json::from_str::<Vec<String>>(&text[i..=end]) {
                        if array.first().is_some_and(|first| is_drainit(first)) {
                            out.push((i, array));
                        }
                        i = end;
                    }
                }
            }
        }
        i += 1;
    }
    out
}

/// Every drainit run shown in a document's code blocks.
fn invocations(doc: &Doc) -> Vec<Invocation> {
    let mut out = Vec::new();
    for block in blocks(&doc.text) {
        // A transcript: only the `$ ` lines are commands, the rest output.
        let prompt = block.lines.iter().any(|(_, l)| l.starts_with("$ "));
        // Join continuation lines.
        let mut lines: Vec<(usize, String)> = Vec::new();
        let mut pending: Option<(usize, String)> = None;
        for (n, line) in &block.lines {
            let line = match &mut pending {
                Some((_, text)) => {
                    text.push(' ');
                    text.push_str(line.trim());
                    std::mem::take(text)
                }
                None => line.clone(),
            };
            let n = pending.take().map_or(*n, |(n, _)| n);
            if let Some(head) = line.strip_suffix('\\') {
                pending = Some((n, head.to_string()));
            } else {
                lines.push((n, line));
            }
        }
        lines.extend(pending);
        let lines: Vec<(usize, String)> = if prompt {
            lines
                .into_iter()
                .filter_map(|(n, l)| l.strip_prefix("$ ").map(|l| (n, l.to_string())))
                .collect()
        } else {
            lines
        };
        // Dockerfile `ENV NAME=VALUE` lines apply to the block's arrays.
        let block_env: Vec<(String, String)> = lines
            .iter()
            .filter_map(|(_, l)| l.trim_start().strip_prefix("ENV "))
            .flat_map(|rest| shell_commands(rest).into_iter().flatten())
            .filter_map(|(w, _)| is_assignment(&w))
            .filter(|(name, _)| passed_on(name))
            .collect();
        let all = lines.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>();
        for (k, (n, line)) in lines.iter().enumerate() {
            let at = format!("{}:{n}", doc.name);
            // JSON arrays, which may go on over the next lines.
            if line.contains("[\"") || line.trim_end().ends_with('[') {
                let text = all[k..].join("\n");
                let first_end = text.find('\n').unwrap_or(text.len());
                for (start, array) in json_arrays(&text) {
                    // Only arrays that begin on this line.
                    if start >= first_end {
                        continue;
                    }
                    out.push(Invocation {
                        at: at.clone(),
                        line: line.clone(),
                        args: array[1..].to_vec(),
                        env: block_env.clone(),
                        dynamic: false,
                    });
                }
                if block.info == "json" || line.contains("[\"") {
                    continue;
                }
            }
            for words in shell_commands(line) {
                let mut env = Vec::new();
                let mut i = 0;
                while let Some((name, value)) = words.get(i).and_then(|(w, _)| is_assignment(w)) {
                    if passed_on(&name) {
                        env.push((name, value));
                    }
                    i += 1;
                }
                while words
                    .get(i)
                    .is_some_and(|(w, _)| WRAPPERS.contains(&w.as_str()))
                {
                    let wrapper = words[i].0.clone();
                    i += 1;
                    while words
                        .get(i)
                        .is_some_and(|(w, _)| w.starts_with('-') || is_assignment(w).is_some())
                    {
                        i += 1;
                    }
                    if wrapper == "timeout" {
                        i += 1; // the duration
                    }
                }
                let Some((first, _)) = words.get(i) else {
                    continue;
                };
                if is_drainit(first) {
                    let rest = &words[i + 1..];
                    out.push(Invocation {
                        at: at.clone(),
                        line: line.clone(),
                        args: rest.iter().map(|(w, _)| w.clone()).collect(),
                        env,
                        dynamic: rest.iter().any(|(_, d)| *d),
                    });
                } else if first == "docker" && words.get(i + 1).is_some_and(|(w, _)| w == "run") {
                    // `docker run -e DRAINIT_…=…`: the variables must parse.
                    let mut vars = Vec::new();
                    let mut dynamic = false;
                    let mut j = i + 2;
                    while j < words.len() {
                        let (w, d) = &words[j];
                        let pair = match w.as_str() {
                            "-e" | "--env" => {
                                j += 1;
                                words.get(j).cloned()
                            }
                            w => w.strip_prefix("--env=").map(|v| (v.to_string(), *d)),
                        };
                        if let Some((pair, d)) = pair {
                            if let Some((name, value)) = is_assignment(&pair) {
                                if passed_on(&name) {
                                    dynamic |= d;
                                    vars.push((name, value));
                                }
                            }
                        }
                        j += 1;
                    }
                    if !vars.is_empty() {
                        out.push(Invocation {
                            at: at.clone(),
                            line: line.clone(),
                            args: Vec::new(),
                            env: vars,
                            dynamic,
                        });
                    }
                }
            }
        }
    }
    // Arrays in the prose too (`ENTRYPOINT ["/drainit", "--"]` in a sentence
    // or a table).
    let code = code_lines(&doc.text);
    for (i, line) in doc.text.lines().enumerate() {
        if code.contains(&(i + 1)) {
            continue;
        }
        for (_, array) in json_arrays(line) {
            out.push(Invocation {
                at: format!("{}:{}", doc.name, i + 1),
                line: line.to_string(),
                args: array[1..].to_vec(),
                env: Vec::new(),
                dynamic: false,
            });
        }
    }
    out
}

/// The numbers of the lines inside fenced code blocks.
fn code_lines(text: &str) -> std::collections::HashSet<usize> {
    blocks(text)
        .iter()
        .flat_map(|b| b.lines.iter().map(|(n, _)| *n))
        .collect()
}

/// drainit's options from `--help`: each name (`-p`, `--pdeathsig`) and
/// whether it takes a value.
fn options_from_help() -> HashMap<String, bool> {
    let out = Command::new(BIN)
        .arg("--help")
        .env_clear()
        .env("PATH", PATH)
        .output()
        .expect("run drainit --help");
    assert!(out.status.success(), "drainit --help failed");
    let help = String::from_utf8_lossy(&out.stdout);
    let mut options = HashMap::new();
    for line in help.lines() {
        let line = line.trim_start();
        if !line.starts_with('-') {
            continue;
        }
        // The flag column ends at the first run of two spaces.
        let column = line.split("  ").next().unwrap_or(line);
        let takes_value = column.contains('<');
        for word in column.split([',', ' ']) {
            let name = word.trim_end_matches("...");
            if name.starts_with('-') && name.len() > 1 {
                options.insert(name.to_string(), takes_value);
            }
        }
    }
    assert!(
        options.values().filter(|v| **v).count() > 10 && options.len() > 30,
        "could not read the options from drainit --help:\n{help}"
    );
    options
}

/// A command's program, replaced by `/bin/true` when it cannot be found
/// here (`nginx -s quit` → `/bin/true -s quit`), so the example's quoting
/// is still checked.
fn runnable_command(cmd: &str) -> String {
    let cmd = cmd.trim_start();
    let (program, rest) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
    let exists = if program.contains('/') {
        Path::new(program).is_file()
    } else {
        PATH.split(':')
            .any(|dir| Path::new(dir).join(program).is_file())
    };
    if exists || program.is_empty() {
        cmd.to_string()
    } else {
        format!("/bin/true {rest}")
    }
}

fn into_dir(dir: &Path, value: &str) -> String {
    let name = Path::new(value)
        .file_name()
        .map_or("file".into(), |n| n.to_string_lossy().into_owned());
    dir.join(name).display().to_string()
}

/// The example's options with the program replaced by `/bin/true`, and
/// paths and commands made safe to run here.
fn runnable_args(args: &[String], options: &HashMap<String, bool>, dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    let mut program = false;
    let rewrite = |name: &str, value: &str| -> String {
        if CREATES_FILE.contains(&name) {
            into_dir(dir, value)
        } else if COMMANDS.contains(&name) {
            runnable_command(value)
        } else {
            value.to_string()
        }
    };
    while i < args.len() {
        let arg = &args[i];
        if arg == "--" {
            program = true;
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (format!("--{n}"), Some(v)),
                None => (arg.clone(), None),
            };
            match (options.get(&name), inline) {
                (Some(true), Some(v)) => out.push(format!("{name}={}", rewrite(&name, v))),
                (Some(true), None) => {
                    out.push(arg.clone());
                    if let Some(v) = args.get(i + 1) {
                        out.push(rewrite(&name, v));
                        i += 1;
                    }
                }
                // Unknown options stay, for drainit to refuse.
                _ => out.push(arg.clone()),
            }
        } else if arg.starts_with('-') && arg.len() > 1 {
            out.push(arg.clone());
            // A cluster such as `-vvv` or `-e3`: a short option that takes
            // a value ends it, with the value attached or next.
            let valued = arg[1..]
                .char_indices()
                .find(|(_, c)| options.get(&format!("-{c}")).copied().unwrap_or(false));
            if let Some((k, _)) = valued {
                if k + 2 == arg.len() {
                    if let Some(v) = args.get(i + 1) {
                        out.push(v.clone());
                        i += 1;
                    }
                }
            }
        } else {
            program = true;
            break;
        }
        i += 1;
    }
    let action = out
        .iter()
        .any(|a| ["-h", "--help", "-V", "--version", "-l", "--license"].contains(&a.as_str()));
    if program || !action {
        out.push("--".into());
        out.push("/bin/true".into());
    }
    out
}

/// Runs drainit; its exit code (None if killed or timed out) and stderr.
fn run(
    args: &[String],
    env: &[(String, String)],
    sa: Option<&PathBuf>,
) -> (Option<i32>, String, bool) {
    let mut command = Command::new(BIN);
    if let Some(sa) = sa {
        // SAFETY: test-only; the closure makes plain syscalls.
        unsafe {
            command.pre_exec(support::service_account_at(sa));
        }
    }
    let mut child = command
        .args(args)
        .env_clear()
        .env("PATH", PATH)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start drainit");
    let started = Instant::now();
    let (status, timed_out) = loop {
        if let Some(status) = child.try_wait().expect("wait for drainit") {
            break (Some(status), false);
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            break (None, true);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (status.and_then(|s| s.code()), stderr, timed_out)
}

#[test]
fn every_documented_command_line_parses() {
    let options = options_from_help();
    let dir = std::env::temp_dir().join(format!("drainit-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut allowed = vec![0usize; ALLOWLIST.len()];
    let sa = dir.join("serviceaccount");
    std::fs::create_dir_all(&sa).unwrap();
    std::fs::write(sa.join("namespace"), "jobs").unwrap();
    let mut checked = 0;
    let mut failures = Vec::new();
    let docs = docs();
    let mut readme_lines = 0;
    for doc in &docs {
        for inv in invocations(doc) {
            if let Some(k) = ALLOWLIST.iter().position(|(s, _)| inv.line.contains(s)) {
                allowed[k] += 1;
                continue;
            }
            if inv.dynamic {
                failures.push(format!(
                    "{}: `{}` holds a shell expansion in drainit's options; \
                     write the value out, or add the line to ALLOWLIST",
                    inv.at, inv.line
                ));
                continue;
            }
            let args = runnable_args(&inv.args, &options, &dir);
            let mut env: Vec<(String, String)> = inv
                .env
                .iter()
                .map(|(k, v)| {
                    let v = if CREATES_FILE_VARS.contains(&k.as_str()) {
                        into_dir(&dir, v)
                    } else if COMMAND_VARS.contains(&k.as_str()) {
                        v.lines()
                            .map(runnable_command)
                            .collect::<Vec<_>>()
                            .join("\n")
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect();
            // ECS options need an ECS task's variables: a closed local port.
            let ecs = args
                .iter()
                .any(|a| a.starts_with("--ecs") || a.starts_with("--protect"))
                || env
                    .iter()
                    .any(|(k, _)| k.starts_with("DRAINIT_ECS") || k.starts_with("DRAINIT_PROTECT"));
            if ecs {
                env.push((
                    "ECS_CONTAINER_METADATA_URI_V4".into(),
                    "http://127.0.0.1:9/v4".into(),
                ));
                env.push(("ECS_AGENT_URI".into(), "http://127.0.0.1:9/api".into()));
            }
            // `--k8s-protect` needs a pod: the service variables, its name
            // and the service-account directory (mounted for the run, in a
            // mount namespace of its own: these lines need root).
            let k8s = args.iter().any(|a| a.starts_with("--k8s"))
                || env.iter().any(|(k, _)| k.starts_with("DRAINIT_K8S"));
            if k8s && cfg!(not(feature = "k8s")) {
                continue; // a build without the Kubernetes client refuses it
            }
            if k8s {
                env.push(("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()));
                env.push(("KUBERNETES_SERVICE_PORT".into(), "9".into()));
                env.push(("POD_NAME".into(), "worker-1".into()));
            }
            let (code, stderr, timed_out) = run(&args, &env, k8s.then_some(&sa));
            checked += 1;
            if doc.name == "README.md" {
                readme_lines += 1;
            }
            let usage_line = stderr.lines().find(|l| l.starts_with("drainit:"));
            if code == Some(2) || code.is_none() || usage_line.is_some() {
                failures.push(format!(
                    "{}: `{}`\n    ran: drainit {:?} with {:?}\n    exit: {}\n    stderr: {}",
                    inv.at,
                    inv.line.trim(),
                    args,
                    env,
                    if timed_out {
                        "did not end within 10 s".to_string()
                    } else {
                        format!("{code:?}")
                    },
                    stderr.trim()
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    for (k, n) in allowed.iter().enumerate() {
        if *n == 0 {
            failures.push(format!(
                "ALLOWLIST entry {:?} matches no line any more: remove it",
                ALLOWLIST[k].0
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} documented drainit command lines fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 0, "found no drainit command line in the docs");
    assert!(
        readme_lines > 0,
        "found no drainit command line in README.md"
    );
    eprintln!("{checked} documented drainit command lines parse");
}

#[test]
fn readme_is_a_front_door() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    assert!(
        readme.len() < 12_000,
        "README.md is {} bytes; keep it under 12 KB and move detail to docs/",
        readme.len()
    );
    let ecs = readme
        .lines()
        .position(|l| l.starts_with('#') && l.contains("ECS"))
        .expect("README.md has an ECS section");
    assert!(ecs < 200, "the ECS recipe starts at line {}", ecs + 1);
    // CI runs the README's test command: every target, also after one
    // failed.
    const TEST: &str = "cargo test --no-fail-fast";
    let commands = blocks(&readme)
        .into_iter()
        .flat_map(|b| b.lines)
        .any(|(_, l)| l.trim() == TEST);
    assert!(
        commands,
        "README.md shows the test command `{TEST}` in a code block"
    );
    let ci = std::fs::read_to_string(Path::new(ROOT).join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == TEST),
        ".ci/run runs the README's test command `{TEST}`"
    );
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let code = code_lines(text);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if code.contains(&(i + 1)) || !line.starts_with('#') {
            continue;
        }
        let base = slug(line.trim_start_matches('#'));
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

#[test]
fn relative_links_resolve() {
    let mut broken = Vec::new();
    let mut links = 0;
    for doc in docs() {
        let code = code_lines(&doc.text);
        for (i, line) in doc.text.lines().enumerate() {
            if code.contains(&(i + 1)) {
                continue;
            }
            let mut rest = line;
            while let Some(start) = rest.find("](") {
                let after = &rest[start + 2..];
                let Some(end) = after.find(')') else { break };
                let target = &after[..end];
                rest = &after[end..];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                links += 1;
                let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
                let path = if file.is_empty() {
                    doc.path.clone()
                } else {
                    doc.path.parent().unwrap().join(file)
                };
                let at = format!("{}:{}", doc.name, i + 1);
                if !path.exists() {
                    broken.push(format!("{at}: {target}: no such file"));
                } else if !anchor.is_empty() {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    if !anchors(&text).iter().any(|a| a == anchor) {
                        broken.push(format!("{at}: {target}: no such heading"));
                    }
                }
            }
        }
    }
    assert!(links > 0, "found no relative links");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn options_reference_names_every_option() {
    let reference = std::fs::read_to_string(Path::new(ROOT).join("docs/options.md")).unwrap();
    let mut missing: Vec<String> = options_from_help()
        .into_keys()
        .filter(|name| name.starts_with("--") && !reference.contains(&format!("`{name}")))
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/options.md does not describe: {}",
        missing.join(", ")
    );
}

#[test]
fn docs_speak_of_what_drainit_does() {
    // Words about how the project was made, not about what drainit does.
    const HISTORY: &[&str] = &[
        "where the spec",
        "where the issue",
        "the spec is silent",
        "issue was silent",
        "issue left it open",
        "to be merged",
        "it used to",
        "review fix",
        "after the fixes",
        "shared/fixtures",
        "../shared",
        "peak rss before",
        "spec §",
    ];
    let mut found = Vec::new();
    for doc in docs() {
        for (i, line) in doc.text.lines().enumerate() {
            let lower = line.to_lowercase();
            for phrase in HISTORY {
                if lower.contains(phrase) {
                    found.push(format!("{}:{}: {phrase:?}", doc.name, i + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The man page (docs/drainit.1, generated by tests/options.rs from the
/// option declarations and docs/man-sections.roff) has the sections a Unix
/// user looks for, in the usual order, and groff reads it without a
/// warning; its example command lines parse like the markdown pages' do.
#[test]
fn man_page_has_the_usual_sections() {
    let page = std::fs::read_to_string(Path::new(ROOT).join("docs/drainit.1")).unwrap();
    let mut at = 0;
    for section in [
        ".SH NAME",
        ".SH SYNOPSIS",
        ".SH DESCRIPTION",
        ".SH OPTIONS",
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH EXAMPLES",
        ".SH \"SEE ALSO\"",
    ] {
        let found = page[at..]
            .find(&format!("{section}\n"))
            .unwrap_or_else(|| panic!("docs/drainit.1 lacks {section} (after byte {at})"));
        at += found + section.len();
    }
    // Every exit code of the README's table is in EXIT STATUS.
    let exit_status =
        &page[page.find(".SH \"EXIT STATUS\"").unwrap()..page.find(".SH ENVIRONMENT").unwrap()];
    for code in ["124", "125", "126", "127", ".B 2\n", ".B 0\n"] {
        assert!(exit_status.contains(code), "EXIT STATUS lacks {code:?}");
    }
    // The EXAMPLES' drainit lines, with roff's escaped dashes undone.
    let examples =
        &page[page.find(".SH EXAMPLES").unwrap()..page.find(".SH \"SEE ALSO\"").unwrap()];
    let text = examples.replace("\\-", "-");
    let arrays = json_arrays(&text);
    assert!(
        arrays.len() >= 3,
        "EXAMPLES shows the ECS, Kubernetes and Docker lines"
    );
    let options = options_from_help();
    let scratch = std::env::temp_dir().join(format!("drainit-man-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    for (line, args) in arrays {
        if !args.first().is_some_and(|w| is_drainit(w)) {
            continue;
        }
        // As in the markdown check: ECS options get a closed local port.
        let env: Vec<(String, String)> = if args.iter().any(|a| a.starts_with("--ecs")) {
            vec![
                (
                    "ECS_CONTAINER_METADATA_URI_V4".into(),
                    "http://127.0.0.1:9/v4".into(),
                ),
                ("ECS_AGENT_URI".into(), "http://127.0.0.1:9/api".into()),
            ]
        } else {
            Vec::new()
        };
        let (code, stderr, _) = run(&runnable_args(&args[1..], &options, &scratch), &env, None);
        assert!(
            code != Some(2) && !stderr.contains("drainit:"),
            "drainit.1 EXAMPLES line {line}: {args:?} is refused: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if !support::or_skip(
        support::has_command("groff"),
        "man page roff check",
        "groff is not installed (Debian's groff-base)",
        "DRAINIT_REQUIRE_GROFF",
    ) {
        return;
    }
    let out = Command::new("groff")
        .args(["-man", "-ww", "-z"])
        .arg(Path::new(ROOT).join("docs/drainit.1"))
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("groff runs");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "groff warns about docs/drainit.1: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
