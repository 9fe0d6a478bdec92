//! Helpers shared by the end-to-end tests (not a test target itself).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A tiny HTTP/1.1 server: answers each request with the next scripted
/// (status, assistant content) pair, repeating the last one; records request bodies.
pub struct Server {
    pub base_url: String,
    pub bodies: Arc<Mutex<Vec<String>>>,
}

pub fn serve(script: Vec<(u16, String)>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    let script = Arc::new(Mutex::new((script, 0usize)));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&body).into_owned());
            let (status, content) = {
                let mut s = script.lock().unwrap();
                let i = s.1.min(s.0.len() - 1);
                s.1 += 1;
                s.0[i].clone()
            };
            let reply = if status == 200 {
                serde_json::json!({"choices": [{"message": {"role": "assistant", "content": content}}]}).to_string()
            } else {
                content
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    Server { base_url, bodies }
}
