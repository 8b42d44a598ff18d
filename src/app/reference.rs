//! The options reference in Markdown (docs/options.md), rendered from the
//! option declarations (`app::options`). Not used by the binary: a test
//! writes and compares it.

use std::fmt::Write as _;

use crate::app::options::{Default, Heading, Kind, OPTIONS};

/// The whole page.
pub fn reference() -> String {
    let mut md = String::from(REFERENCE_HEAD);
    for (heading, title, intro) in [
        (Heading::General, "General", ""),
        (
            Heading::Draining,
            "Draining",
            "How these work together: [draining.md](draining.md).\n\n",
        ),
        (
            Heading::Notify,
            "sd_notify",
            "See [notify.md](notify.md).\n\n",
        ),
        (Heading::Ecs, "Amazon ECS", "See [ecs.md](ecs.md).\n\n"),
        (
            Heading::Kubernetes,
            "Kubernetes",
            "See [kubernetes.md](kubernetes.md).\n\n",
        ),
        (
            Heading::Health,
            "Health checks and metrics",
            "See [health.md](health.md) and [metrics.md](metrics.md).\n\n",
        ),
    ] {
        let _ = write!(
            md,
            "\n## {title}\n\n{intro}| option | variable | default | meaning |\n| --- | --- | --- | --- |\n"
        );
        for opt in OPTIONS.iter().filter(|o| o.heading == heading) {
            let mut names = String::new();
            if let Some(short) = opt.short {
                let _ = write!(names, "`-{short}`, ");
            }
            let _ = write!(names, "`--{}", opt.long);
            if opt.kind == Kind::Optional {
                let _ = write!(names, " [{}]", opt.value);
            } else if !opt.value.is_empty() {
                let _ = write!(names, " {}", opt.value);
            }
            names.push('`');
            let var = opt.var().map(|v| format!("`{v}`")).unwrap_or_default();
            let default = match (opt.default, opt.kind) {
                (Default::None, Kind::Flag) if opt.var => "off".to_string(),
                (Default::None, Kind::One | Kind::Commas | Kind::Lines) => "none".to_string(),
                (Default::None, Kind::Optional) => "off".to_string(),
                (Default::None, _) => String::new(),
                (Default::Value(v), _) => format!("`{v}`"),
                (Default::ValueWhen(v, when), _) => format!("`{v}` {when}"),
                (Default::Said(words), _) => words.to_string(),
            };
            let mut meaning = opt.help.to_string();
            if !opt.repeat_note().is_empty() {
                let _ = write!(meaning, " {}", opt.repeat_note());
            }
            let _ = writeln!(
                md,
                "| {names} | {var} | {default} | {} |",
                meaning.replace('|', "\\|")
            );
        }
        if heading == Heading::General {
            md.push_str("| `-h`, `--help` | | | Print help and exit |\n");
        }
    }
    md.push_str(REFERENCE_TAIL);
    md
}

const REFERENCE_HEAD: &str = "\
<!-- Generated from src/app/options.rs by `DRAINIT_REGENERATE_DOCS=1 cargo test --test options`;
     edit the declarations there, not this file. -->

# Options reference

```text
drainit [OPTIONS] [--] PROGRAM [ARGS]...
```

`PROGRAM` is required. Option parsing stops at `--` or at the first word
that is not an option: `drainit ls -l` runs `ls -l`.

Every option with a variable in the tables below can also be set with it:
`DRAINIT_` and the long name in capitals, dashes as underscores
(`--pre-stop-delay` is `DRAINIT_PRE_STOP_DELAY`). A flag beats its
variable, and drainit says so at start (`--grace overrides
DRAINIT_GRACE`, at info level). `drainit --help` shows the same list; the man page is
[drainit.1](drainit.1) (`man ./docs/drainit.1`).

Topics: [draining](draining.md), [sd_notify](notify.md), [ECS](ecs.md),
[signals](signals.md), [logs](troubleshooting.md).
";

const REFERENCE_TAIL: &str = "
## Variables without an option

| variable | meaning |
| --- | --- |
| `TINI_SUBREAPER` | set to anything (even `0`): `--subreaper`, as in tini |
| `TINI_KILL_PROCESS_GROUP` | set to anything (even `0`): `--kill-process-group`, as in tini |
| `TINI_VERBOSITY` | the verbosity level 0-4; replaces the `-v` count and `DRAINIT_VERBOSE`, as in tini |
| `DUMB_INIT_SETSID` | any value but `0` means `-g`; `0` leaves the default, the child only (`-c` beats it) |
| `DRAINIT_VERBOSITY` | another spelling of `DRAINIT_VERBOSE`, read when that is unset |
| `DRAINIT_LOG` | an env_logger-style filter (`debug`, `drainit=trace`) applied over the verbosity |
| `NOTIFY_SOCKET` | with `--notify`, an outer socket drainit relays to; without it, passed to the child untouched |
| `ECS_CONTAINER_METADATA_URI_V4`, `ECS_CONTAINER_METADATA_URI` | switch ECS support on under `--ecs auto` |
| `ECS_AGENT_URI` | the agent endpoint `--ecs-protect` uses |

## Values

- **Durations** (`D`): `500ms`, `20s`, `2m`, or a bare number of seconds
  (`20`, `0.5`).
- **Signals**: `TERM`, `SIGTERM`, `sigterm` or `15`; real-time signals as
  `RTMIN+N` (34 + N: `SIGRTMIN+3` is 37, as in Docker) or `SIGRTMAX-N`
  (64 - N); 32 and 33 are the C library's.
- **Booleans** (`DRAINIT_*` switches): `1`/`true`/`yes`/`on` or
  `0`/`false`/`no`/`off`; anything else is an error.
- **Empty**: a `DRAINIT_*` variable set to the empty string counts as unset
  (`docker run -e DRAINIT_GRACE=` does nothing).
- **Lists in variables**: repeatable options take a comma-separated list in
  their variable (a comma inside a URL is written `%2C`), except
  `DRAINIT_STOP_EXEC` and `DRAINIT_DRAIN_EXEC`, which hold one command per
  line, since commands contain commas; blank lines are skipped.
- **URLs**: `http://` only (drain endpoints are local; there is no TLS).
  IPv6 literals go in brackets (`http://[::1]:8080/drain`).

An invalid option or variable ends drainit with exit code 2 and one line
naming it, before any child starts; a mistyped option close to a known
one names it (`did you mean --grace?`). A `DRAINIT_*` variable drainit
does not read is a warning at start, naming the nearest known name when
it is as near as a flag's suggestion must be (at most a third of the
name after `DRAINIT_` in edits: `DRAINIT_DRAIN_ULR`: `DRAINIT_DRAIN_URL`),
and the run goes on. `DRAINIT_GIT_COMMIT`, which the build reads, is
passed by in silence.
";
