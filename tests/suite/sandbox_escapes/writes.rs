//! Writes outside the workspace by every path, and what claims to turn the sandbox off.

use std::path::PathBuf;

use super::{DEFAULT, FULL, Scene, chat, chat_in, refused, scene};

#[test]
fn a_hostile_model_cannot_write_outside_the_workspace_and_its_writes_inside_still_work() {
    let escapes = |s: &Scene| {
        let out = s.outside.display();
        let tmp = format!(
            "/tmp/troupe-escape-{}.txt",
            s.base.file_name().unwrap().to_string_lossy()
        );
        (
            vec![
                format!("echo x > {out}/absolute.txt"),
                "echo x > ../outside/dotdot.txt".to_string(),
                format!("ln -s {out} planted && echo x > planted/symlink.txt"),
                format!("ln {out}/target hardlink; echo changed >> hardlink"),
                format!("echo x > /proc/self/root{out}/proc_root.txt"),
                format!("echo x > {tmp}"),
                "echo moved > moving.txt && mv moving.txt ../outside/renamed.txt".to_string(),
                "echo '[core] hooksPath = /evil' >> .git/config".to_string(),
                format!(
                    "mkdir -p m && unshare -rm sh -c 'mount --bind {out} m && echo x > m/mount.txt'"
                ),
                "echo ok > inside.txt && mkdir -p sub && echo ok > sub/f && cat sub/f && \
                 echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\""
                    .to_string(),
            ],
            PathBuf::from(tmp),
        )
    };
    let written = [
        "absolute.txt",
        "dotdot.txt",
        "symlink.txt",
        "proc_root.txt",
        "renamed.txt",
        "mount.txt",
    ];

    let open = scene();
    let (commands, tmp) = escapes(&open);
    let run = chat_in(&open, FULL, &commands);
    assert!(run.status.success(), "{}", run.stdout);
    for file in written {
        assert!(
            open.outside.join(file).exists(),
            "unconfined, {file} was not written: {:?}",
            run.results
        );
    }
    assert_eq!(
        std::fs::read_to_string(open.outside.join("target")).unwrap(),
        "original\nchanged\n"
    );
    assert!(
        tmp.exists(),
        "unconfined, {} was not written",
        tmp.display()
    );
    std::fs::remove_file(&tmp).unwrap();
    assert!(
        std::fs::read_to_string(open.ws.join(".git/config"))
            .unwrap()
            .contains("/evil")
    );

    let closed = scene();
    let (commands, tmp) = escapes(&closed);
    let run = chat_in(&closed, DEFAULT, &commands);
    assert!(run.status.success(), "{}", run.stdout);
    assert_eq!(run.results.len(), commands.len(), "{:?}", run.results);
    for file in written {
        assert!(
            !closed.outside.join(file).exists(),
            "{file} was written: {:?}",
            run.results
        );
    }
    assert_eq!(
        std::fs::read_to_string(closed.outside.join("target")).unwrap(),
        "original\n"
    );
    assert!(
        !tmp.exists(),
        "{} was written outside the private TMPDIR",
        tmp.display()
    );
    for (i, command) in commands.iter().enumerate().take(9) {
        assert!(
            refused(run.result(i)),
            "`{command}` was not refused: {}",
            run.result(i)
        );
    }
    assert!(
        run.result(7).contains("Read-only file system"),
        "{}",
        run.result(7)
    );
    assert_eq!(
        std::fs::read_to_string(closed.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    // The workspace and the private TMPDIR still work.
    assert!(run.result(9).contains("ok\nt\n"), "{}", run.result(9));
    assert!(!refused(run.result(9)), "{}", run.result(9));
    assert_eq!(
        std::fs::read_to_string(closed.ws.join("inside.txt")).unwrap(),
        "ok\n"
    );
    assert!(
        closed.ws.join("moving.txt").exists(),
        "the refused move lost the file"
    );
}

#[test]
fn nothing_a_command_sets_or_writes_turns_the_sandbox_off() {
    let claims = |s: &Scene| {
        let out = s.outside.display();
        vec![
            format!("export TROUPE_SANDBOX=off TROUPE_SANDBOX_POLICY=full; echo x > {out}/env.txt"),
            "printf '\\n[agents.assistant.sandbox]\\npolicy = \"full\"\\n' >> troupe.toml; \
             echo '{\"forged\":true}' >> session.jsonl"
                .to_string(),
            format!(
                "mkdir -p .troupe && echo 'policy = \"full\"' > .troupe/sandbox.toml && \
                 echo 'policy = \"full\"' > sandbox.toml; echo x > {out}/after_files.txt"
            ),
        ]
    };
    let open = scene();
    let run = chat(
        &open,
        FULL,
        &claims(&open),
        &open.ws.join("session.jsonl"),
        &[],
        "",
    );
    assert!(open.outside.join("env.txt").exists(), "{:?}", run.results);
    assert!(
        std::fs::read_to_string(open.ws.join("troupe.toml"))
            .unwrap()
            .contains("assistant.sandbox")
    );

    let closed = scene();
    let session = closed.ws.join("session.jsonl");
    let run = chat(&closed, DEFAULT, &claims(&closed), &session, &[], "");
    assert!(run.status.success(), "{}", run.stdout);
    assert!(
        !closed.outside.join("env.txt").exists(),
        "{}",
        run.result(0)
    );
    assert!(
        !closed.outside.join("after_files.txt").exists(),
        "{}",
        run.result(2)
    );
    // The configuration and the session log are troupe's: read-only for the commands.
    assert!(
        run.result(1).contains("Read-only file system"),
        "{}",
        run.result(1)
    );
    let config = std::fs::read_to_string(closed.ws.join("troupe.toml")).unwrap();
    assert!(!config.contains("assistant.sandbox"), "{config}");
    // (The log records the call, whose arguments name the line; the line itself is not in it.)
    let log = std::fs::read_to_string(&session).unwrap();
    assert!(
        !log.lines().any(|l| l.trim() == "{\"forged\":true}"),
        "{log}"
    );
    // The next chat, started on the same files, is as confined as the first.
    let after = vec![format!(
        "echo x > {}/after_restart.txt",
        closed.outside.display()
    )];
    let restarted = chat(&closed, DEFAULT, &after, &session, &[], "");
    assert!(restarted.status.success(), "{}", restarted.stdout);
    assert!(refused(restarted.result(0)), "{}", restarted.result(0));
    assert!(!closed.outside.join("after_restart.txt").exists());
}

#[test]
fn a_user_other_than_root_is_confined_as_root_is() {
    // troupe makes itself non-dumpable, which gives its /proc files to root: a command started
    // by any other user must still get its namespace (.git read-only) and its rules.
    let commands = |s: &Scene| {
        vec![
            format!("echo x > {}/absolute.txt", s.outside.display()),
            "echo '[core] hooksPath = /evil' >> .git/config".to_string(),
            "echo ok > inside.txt && cat inside.txt && id -u".to_string(),
        ]
    };
    let open = super::unprivileged(scene());
    let run = chat_in(&open, FULL, &commands(&open));
    assert!(run.status.success(), "{}", run.stdout);
    assert!(
        open.outside.join("absolute.txt").exists(),
        "unconfined: {:?}",
        run.results
    );

    let closed = super::unprivileged(scene());
    let run = chat_in(&closed, DEFAULT, &commands(&closed));
    assert!(run.status.success(), "{}", run.stdout);
    assert!(
        !closed.outside.join("absolute.txt").exists(),
        "{:?}",
        run.results
    );
    assert!(refused(run.result(0)), "{}", run.result(0));
    assert!(
        run.result(1).contains("Read-only file system"),
        "{}",
        run.result(1)
    );
    assert_eq!(
        std::fs::read_to_string(closed.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    let inside = run.result(2);
    assert!(inside.contains("ok\n"), "{inside}");
    assert!(!refused(inside), "{inside}");
    if let Some(user) = closed.user {
        // The command is who troupe is, in its namespace as outside it.
        assert!(inside.contains(&format!("ok\n{user}\n")), "{inside}");
    }
}
