//! Runs the built `jobwarden` as users do: from the repository's root, with stdin when given.
//! Whatever it is given, it must not panic: every run checks that.
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

pub fn jobwarden(args: &[&str], stdin: Option<&[u8]>) -> Output {
    run(args, stdin, Reader::ReadsEverything)
}

/// As `jobwarden ... | head -0`: the reader of stdout is gone before the first line.
pub fn jobwarden_to_closed_reader(args: &[&str], stdin: Option<&[u8]>) -> Output {
    run(args, stdin, Reader::GoneAtOnce)
}

#[derive(PartialEq)]
enum Reader {
    ReadsEverything,
    GoneAtOnce,
}

fn run(args: &[&str], stdin: Option<&[u8]>, reader: Reader) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jobwarden starts");
    if reader == Reader::GoneAtOnce {
        drop(child.stdout.take());
    }
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write stdin");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("jobwarden finishes");
    assert!(
        !stderr(&out).contains("panicked"),
        "jobwarden {args:?} panicked:\n{}",
        stderr(&out)
    );
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
