//! Reads of secrets under a read-restricting policy, and connections to loopback and to a unix
//! socket outside the workspace.

use super::{DEFAULT, FULL, Scene, chat, chat_in, refused, scene};

#[test]
fn a_read_restricting_policy_keeps_ssh_keys_and_the_users_keys_out_of_reach() {
    let commands = vec![
        "cat ~/.ssh/id_ed25519".to_string(),
        "cat ~/.config/troupe/keys.toml".to_string(),
        "cat README.md".to_string(),
    ];
    let open = scene();
    let run = chat_in(&open, FULL, &commands);
    assert!(
        run.result(0).contains("PRIVATE-KEY-MATERIAL"),
        "{}",
        run.result(0)
    );
    assert!(
        run.result(1).contains("sk-user-secret"),
        "{}",
        run.result(1)
    );

    let closed = scene();
    let run = chat(
        &closed,
        "reads = \"limited\"",
        &commands,
        &closed.base.join("s.jsonl"),
        &[],
        "",
    );
    assert!(run.status.success(), "{}", run.stdout);
    for i in 0..2 {
        assert!(refused(run.result(i)), "{}", run.result(i));
        assert!(
            run.result(i).contains("read only the system's directories"),
            "{}",
            run.result(i)
        );
    }
    assert!(!run.stdout.contains("PRIVATE-KEY") && !run.stdout.contains("sk-user-secret"));
    assert!(!run.results.concat().contains("PRIVATE-KEY"));
    assert!(run.result(2).contains("# the project"), "{}", run.result(2));
}

#[test]
fn a_hostile_model_reaches_no_listener_on_loopback_and_no_unix_socket_outside() {
    let attempts = |s: &Scene| {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let path = s.outside.join("agent.sock");
        let unix = std::os::unix::net::UnixListener::bind(&path).unwrap();
        unix.set_nonblocking(true).unwrap();
        let commands = vec![
            format!(
                "bash -c 'echo tcp > /dev/tcp/127.0.0.1/{}'",
                tcp.local_addr().unwrap().port()
            ),
            format!(
                "bash -c 'echo udp > /dev/udp/127.0.0.1/{}'",
                udp.local_addr().unwrap().port()
            ),
            format!(
                "perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => \"{}\") or die \
                 \"connect: $!\\n\"; print $s \"unix\\n\"'",
                path.display()
            ),
        ];
        (commands, tcp, udp, unix)
    };
    let reached = |tcp: &std::net::TcpListener,
                   udp: &std::net::UdpSocket,
                   unix: &std::os::unix::net::UnixListener| {
        let mut buf = [0u8; 16];
        [
            tcp.accept().is_ok(),
            udp.recv(&mut buf).is_ok(),
            unix.accept().is_ok(),
        ]
    };

    let open = scene();
    let (commands, tcp, udp, unix) = attempts(&open);
    let run = chat_in(&open, FULL, &commands);
    assert_eq!(
        reached(&tcp, &udp, &unix),
        [true; 3],
        "unconfined: {:?}",
        run.results
    );

    let closed = scene();
    let (commands, tcp, udp, unix) = attempts(&closed);
    let run = chat_in(&closed, DEFAULT, &commands);
    assert!(run.status.success(), "{}", run.stdout);
    assert_eq!(reached(&tcp, &udp, &unix), [false; 3], "{:?}", run.results);
    for i in 0..3 {
        assert!(refused(run.result(i)), "{}", run.result(i));
        assert!(
            run.result(i).contains("had no network"),
            "{}",
            run.result(i)
        );
    }
}
