//! Where drainit runs, from what each platform sets in the environment,
//! and each platform's own kill: one table of the default `--grace` that
//! ends at least 1 s before the platform's default kill, and the words
//! the start line says it with.

use super::env::Env;

/// A platform with a known kill after its stop signal (`Other`: none
/// recognised).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Platform {
    Ecs,
    ContainerApps,
    Kubernetes,
    CloudRun,
    Fly,
    Nomad,
    Other,
}

/// What a platform's kill is, as the default `--grace` fits it.
pub(super) struct Clock {
    pub platform: Platform,
    /// Its name in the lines that say it.
    pub name: &'static str,
    /// The default `--grace`, under the platform's default kill.
    pub grace: &'static str,
    /// When its kill comes, as the start line says it.
    pub kill: &'static str,
    /// The setting that moves the kill later, when the line names it: a
    /// longer one needs a longer `--grace`.
    pub longer: Option<&'static str>,
}

/// Every platform's clock. ECS's stopTimeout and the
/// terminationGracePeriodSeconds of Kubernetes and Container Apps default
/// to 30 s; Fly.io's and Nomad's kill_timeout to 5 s; Cloud Run kills 10 s
/// after its SIGTERM, always.
const CLOCKS: [Clock; 6] = [
    Clock {
        platform: Platform::Ecs,
        name: "ECS",
        grace: "25s",
        kill: "whose stopTimeout defaults to 30 s",
        longer: None,
    },
    Clock {
        platform: Platform::Kubernetes,
        name: "Kubernetes",
        grace: "25s",
        kill: "whose terminationGracePeriodSeconds defaults to 30 s",
        longer: None,
    },
    Clock {
        platform: Platform::ContainerApps,
        name: "Azure Container Apps",
        grace: "25s",
        kill: "whose terminationGracePeriodSeconds defaults to 30 s",
        longer: Some("terminationGracePeriodSeconds"),
    },
    Clock {
        platform: Platform::CloudRun,
        name: "Cloud Run",
        grace: "9s",
        kill: "which kills 10 s after its SIGTERM",
        longer: None,
    },
    Clock {
        platform: Platform::Fly,
        name: "Fly.io",
        grace: "4s",
        kill: "whose kill_timeout defaults to 5 s",
        longer: Some("kill_timeout"),
    },
    Clock {
        platform: Platform::Nomad,
        name: "Nomad",
        grace: "4s",
        kill: "whose kill_timeout defaults to 5 s",
        longer: Some("kill_timeout"),
    },
];

/// The variables that say where drainit runs, in the order they are
/// looked at: the first one set (and not empty) wins. ECS comes first of
/// all, by a usable task metadata variable (`platform::read`). Container
/// Apps sets `KUBERNETES_*` too; Knative on Kubernetes sets `K_SERVICE`
/// as Cloud Run does, so that one is read after Kubernetes.
const SEEN_BY: [(&str, Platform); 7] = [
    ("CONTAINER_APP_NAME", Platform::ContainerApps),
    ("CONTAINER_APP_JOB_NAME", Platform::ContainerApps),
    ("CLOUD_RUN_JOB", Platform::CloudRun),
    ("KUBERNETES_SERVICE_HOST", Platform::Kubernetes),
    ("K_SERVICE", Platform::CloudRun),
    ("FLY_MACHINE_ID", Platform::Fly),
    ("NOMAD_ALLOC_ID", Platform::Nomad),
];

/// The platform drainit runs on, and the variable that said so (None for
/// ECS, said by its own lines, and for none recognised).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    pub platform: Platform,
    pub by: Option<&'static str>,
}

impl Seen {
    /// From the environment; `ecs`: a usable ECS task metadata variable
    /// is set.
    pub fn read(env: &Env<'_>, ecs: bool) -> Seen {
        if ecs {
            return Seen {
                platform: Platform::Ecs,
                by: None,
            };
        }
        let set = |var: &str| (env.lookup)(var).is_some_and(|v| !v.is_empty());
        match SEEN_BY.iter().find(|(var, _)| set(var)) {
            Some(&(var, platform)) => Seen {
                platform,
                by: Some(var),
            },
            None => Seen {
                platform: Platform::Other,
                by: None,
            },
        }
    }

    /// The platform's clock (None: no platform recognised).
    pub fn clock(&self) -> Option<&'static Clock> {
        CLOCKS.iter().find(|c| c.platform == self.platform)
    }

    /// The platform and what said so, for the lines that name it:
    /// "on Fly.io (FLY_MACHINE_ID is set)".
    pub fn name(&self) -> String {
        let name = self.clock().map_or("", |c| c.name);
        match self.by {
            Some(var) if self.platform != Platform::Kubernetes => {
                format!("on {name} ({var} is set)")
            }
            _ => format!("on {name}"),
        }
    }

    /// The default `--grace`'s reason at start: the platform, what said
    /// so, and its kill.
    pub fn why(&self) -> String {
        let Some(clock) = self.clock() else {
            return "no platform with a known kill here; docker stop waits 10 s".into();
        };
        let longer = clock.longer.map_or(String::new(), |setting| {
            format!("; a longer {setting} needs a longer --grace")
        });
        let (name, kill) = (clock.name, clock.kill);
        match self.by.filter(|_| self.platform != Platform::Kubernetes) {
            Some(var) => format!("on {name}, seen from {var}, {kill}{longer}"),
            None => format!("on {name}, {kill}{longer}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::cli::RawArgs;
    use clap::Parser;
    use std::ffi::OsString;

    fn seen(vars: &[(&str, &str)]) -> Seen {
        let lookup = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        };
        Seen::read(
            &Env::new(&lookup, RawArgs::try_parse_from(["drainit", "x"]).unwrap()),
            false,
        )
    }

    #[test]
    fn each_platform_is_seen_from_its_own_variables() {
        let k8s = ("KUBERNETES_SERVICE_HOST", "10.0.0.1");
        for (vars, platform) in [
            (&[][..], Platform::Other),
            (&[k8s][..], Platform::Kubernetes),
            (&[("FLY_MACHINE_ID", "e28")][..], Platform::Fly),
            (&[("NOMAD_ALLOC_ID", "5b1")][..], Platform::Nomad),
            (&[("K_SERVICE", "web")][..], Platform::CloudRun),
            (&[("CLOUD_RUN_JOB", "job")][..], Platform::CloudRun),
            // Knative on Kubernetes sets K_SERVICE too.
            (&[("K_SERVICE", "web"), k8s][..], Platform::Kubernetes),
            (&[("CLOUD_RUN_JOB", "job"), k8s][..], Platform::CloudRun),
            // Container Apps sets KUBERNETES_* too: it is read first.
            (
                &[("CONTAINER_APP_NAME", "a"), k8s][..],
                Platform::ContainerApps,
            ),
            (
                &[("CONTAINER_APP_JOB_NAME", "j"), k8s][..],
                Platform::ContainerApps,
            ),
            // An empty variable is not set.
            (&[("FLY_MACHINE_ID", "")][..], Platform::Other),
        ] {
            assert_eq!(seen(vars).platform, platform, "{vars:?}");
        }
        assert_eq!(
            seen(&[("FLY_MACHINE_ID", "e28")]).name(),
            "on Fly.io (FLY_MACHINE_ID is set)"
        );
    }

    #[test]
    fn each_default_grace_ends_a_second_before_the_platform_kill() {
        let kill = |p| match p {
            Platform::Ecs | Platform::Kubernetes | Platform::ContainerApps => 30,
            Platform::CloudRun => 10,
            Platform::Fly | Platform::Nomad => 5,
            Platform::Other => unreachable!(),
        };
        for clock in &CLOCKS {
            let grace = crate::app::values::parse_grace(clock.grace)
                .unwrap()
                .unwrap();
            assert!(
                grace.as_secs() < kill(clock.platform),
                "{:?}",
                clock.platform
            );
            assert!(clock.kill.contains(&format!("{} s", kill(clock.platform))));
        }
    }
}
