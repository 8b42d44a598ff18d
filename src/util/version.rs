//! The version line: `drainit X.Y.Z - git.<7 hex>`, drainit's own name and
//! version in the shape Docker's `parseInitVersion` reads from its `--init`
//! binary (it takes the commit after ` - git.`), so `docker info` shows it.

/// What clap prints after the program name for `--version`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " - git.",
    env!("DRAINIT_GIT_COMMIT")
);

#[cfg(test)]
mod tests {
    use super::VERSION;

    /// A port of moby's `parseInitVersion` (daemon/info_unix.go): returns
    /// (version, commit), or Err with Docker's message when neither is found.
    fn parse_init_version(v: &str) -> Result<(String, String), String> {
        let mut parts: Vec<&str> = v.split(" - ").collect();
        let mut version = String::new();
        let mut commit = String::new();
        if parts.len() >= 2 {
            let git_parts: Vec<&str> = parts[1].trim().split('.').collect();
            if git_parts.len() == 2 && git_parts[0] == "git" {
                commit = git_parts[1].to_string();
            }
        }
        parts[0] = parts[0].trim();
        if let Some(rest) = parts[0].strip_prefix("tini version ") {
            version = rest.to_string();
        }
        if version.is_empty() && commit.is_empty() {
            return Err(format!("unknown output format: {v}"));
        }
        Ok((version, commit))
    }

    #[test]
    fn the_port_agrees_with_docker_on_known_outputs() {
        assert_eq!(
            parse_init_version("tini version 0.19.0 - git.de40ad0\n"),
            Ok(("0.19.0".into(), "de40ad0".into()))
        );
        // What drainit 0.1.0 printed: dockerd logged exactly this.
        assert_eq!(
            parse_init_version("drainit 0.1.0\n"),
            Err("unknown output format: drainit 0.1.0\n".into())
        );
    }

    #[test]
    fn docker_reads_the_commit_from_drainits_version_line() {
        // clap prints `{name} {version}\n`.
        let line = format!("drainit {VERSION}\n");
        let (_, commit) = parse_init_version(&line).expect("Docker parses it");
        assert!(
            commit == "unknown"
                || (commit.len() == 7 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
            "{commit:?}"
        );
        assert!(line.starts_with(concat!("drainit ", env!("CARGO_PKG_VERSION"), " - git.")));
    }
}
