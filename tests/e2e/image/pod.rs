//! deploy/'s pod (deploy/base/deployment.yaml) as the engine's flags: its container's
//! arguments and environment, its security context, and where it mounts its volumes. Read from
//! the file the install applies, so that the tests run the image the way it is deployed; a
//! field this file does not know how to translate fails the tests rather than being dropped.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::image::engine::Engine;

pub struct DeployedPod {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Volume name to mount path.
    pub mounts: BTreeMap<String, String>,
    security_context: Value,
    container_security_context: Value,
}

pub fn deployed() -> DeployedPod {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/base/deployment.yaml");
    let text = std::fs::read_to_string(&file).expect("deploy/base/deployment.yaml");
    let deployment: Value = serde_yaml_ng::from_str(&text).expect("the Deployment is YAML");
    let spec = &deployment["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "deploy/'s pod runs one container");
    let container = &containers[0];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|s| s.as_str().expect("a string").to_owned())
            .collect()
    };
    DeployedPod {
        args: strings(&container["args"]),
        env: container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                // The downward API's fields, as the kubelet fills them for this pod.
                let from_field = e
                    .pointer("/valueFrom/fieldRef/fieldPath")
                    .and_then(Value::as_str)
                    .map(|path| match path {
                        "metadata.name" => "jobwarden-image-e2e".to_owned(),
                        "metadata.namespace" => "jobwarden-system".to_owned(),
                        "metadata.uid" => "00000000-0000-4000-8000-000000000000".to_owned(),
                        other => panic!("a field the test cannot give: {other}"),
                    });
                assert!(
                    e.get("valueFrom").is_none() || from_field.is_some(),
                    "a value the test cannot give: {e}"
                );
                (
                    text_at(e, "name"),
                    from_field.unwrap_or_else(|| text_at(e, "value")),
                )
            })
            .collect(),
        mounts: container["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                assert_eq!(
                    m["readOnly"], true,
                    "deploy/ mounts its volumes read-only: {m}"
                );
                (text_at(m, "name"), text_at(m, "mountPath"))
            })
            .collect(),
        security_context: spec["securityContext"].clone(),
        container_security_context: container["securityContext"].clone(),
    }
}

impl DeployedPod {
    /// The pod's and its container's security context as `engine run` flags: the user and
    /// groups, a read-only root with nothing mounted writable, the capabilities, no new
    /// privileges. The engine's default seccomp profile is RuntimeDefault's.
    pub fn security_flags(&self, engine: &Engine) -> Vec<String> {
        let pod = object(&self.security_context);
        let container = object(&self.container_security_context);
        let mut flags = Vec::new();
        for (key, value) in &pod {
            match key.as_str() {
                "runAsNonRoot" => assert_eq!(value, &Value::Bool(true)),
                "runAsUser" | "runAsGroup" => {}
                "fsGroup" => flags.push(format!("--group-add={value}")),
                "seccompProfile" => assert_eq!(value["type"], "RuntimeDefault"),
                other => panic!("pod securityContext.{other}: not run by the image tests"),
            }
        }
        let user = &pod["runAsUser"];
        let group = &pod["runAsGroup"];
        assert!(user.is_u64() && group.is_u64(), "a numeric user and group");
        flags.push(format!("--user={user}:{group}"));
        for (key, value) in &container {
            match (key.as_str(), value) {
                ("allowPrivilegeEscalation", Value::Bool(false)) => {
                    flags.push("--security-opt=no-new-privileges".to_owned());
                }
                ("readOnlyRootFilesystem", Value::Bool(true)) => {
                    flags.push("--read-only".to_owned());
                    // podman mounts a writable /tmp, /run and /var/tmp on a read-only root
                    // unless told not to; a pod gets none.
                    if engine.program() == "podman" {
                        flags.push("--read-only-tmpfs=false".to_owned());
                    }
                }
                ("capabilities", caps) => {
                    for (what, flag) in [("drop", "--cap-drop"), ("add", "--cap-add")] {
                        for cap in caps[what].as_array().into_iter().flatten() {
                            let cap = cap.as_str().expect("a capability").to_lowercase();
                            flags.push(format!("{flag}={cap}"));
                        }
                    }
                }
                (other, value) => {
                    panic!("container securityContext.{other}: {value}: not run by the image tests")
                }
            }
        }
        flags
    }
}

fn object(v: &Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn text_at(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} of {v}"))
        .to_owned()
}
