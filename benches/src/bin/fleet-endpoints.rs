//! `fleet-endpoints FILE N`: N loopback HTTP endpoints answering every request with the
//! recorded `/snapshot` document in FILE (as `gpupeek serve` would: `Content-Length`,
//! `Connection: close`), for `benches/run fleet`. Prints the N `127.0.0.1:PORT`
//! addresses, one a line, then serves until killed. One thread per port, blocking: a
//! stand-in for N machines, cheaper than N real `gpupeek serve` processes.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(file), Some(n)) = (
        args.first(),
        args.get(1).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: fleet-endpoints SNAPSHOT.json N");
        std::process::exit(2);
    };
    let body = std::fs::read(file).unwrap_or_else(|e| {
        eprintln!("fleet-endpoints: cannot read {file}: {e}");
        std::process::exit(1)
    });
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    let answer: Arc<[u8]> = answer.into();
    let mut out = String::new();
    for _ in 0..n {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        out += &format!("{}\n", listener.local_addr().expect("bound"));
        let answer = answer.clone();
        std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || serve(listener, &answer))
            .expect("a thread");
    }
    print!("{out}");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}

fn serve(listener: TcpListener, answer: &[u8]) {
    for mut stream in listener.incoming().flatten() {
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => head.extend_from_slice(&buf[..k]),
            }
        }
        let _ = stream.write_all(answer);
    }
}
