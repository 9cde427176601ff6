//! `--control-port`: a tiny HTTP endpoint to end a run early. `POST /stop` (or `GET`, which is
//! what `kubectl get --raw …/pods/load:PORT/proxy/stop` sends) stops sending; the run then
//! waits for the answers still due and prints its summary as at the planned end. The e2e
//! suite reaches it through the apiserver's pod proxy, so a scenario's load lasts as long as
//! the scenario and its counts are read from a pod that finished on its own.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Longest request head read (the request line is all that matters).
const MAX_HEAD: usize = 4096;

/// Serves the endpoint on `listener` until the process ends; `stop` turns true on a stop.
pub async fn serve(listener: TcpListener, stop: watch::Sender<bool>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let mut head = Vec::new();
        let mut buf = [0u8; 512];
        while head.len() < MAX_HEAD && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let (status, body) = match request_line(&head) {
            Some(("POST" | "GET", "/stop")) => {
                let _ = stop.send(true);
                ("200 OK", "stopping\n")
            }
            _ => ("404 Not Found", "POST /stop ends the run\n"),
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = conn.write_all(reply.as_bytes()).await;
        let _ = conn.shutdown().await;
    }
}

/// Method and path (without query) of an HTTP request head.
fn request_line(head: &[u8]) -> Option<(&str, &str)> {
    let text = std::str::from_utf8(head).ok()?;
    let mut parts = text.lines().next()?.split_whitespace();
    let method = parts.next()?;
    let target = parts.next()?;
    Some((method, target.split('?').next().unwrap_or(target)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_line_names_method_and_path() {
        assert_eq!(
            request_line(b"POST /stop HTTP/1.1\r\nhost: x\r\n\r\n"),
            Some(("POST", "/stop"))
        );
        assert_eq!(
            request_line(b"GET /stop?now=1 HTTP/1.1\r\n\r\n"),
            Some(("GET", "/stop"))
        );
        assert_eq!(request_line(b"\xff\xfe"), None);
    }

    #[tokio::test]
    async fn a_stop_request_turns_the_flag() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, mut rx) = watch::channel(false);
        tokio::spawn(serve(listener, tx));
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /nothing HTTP/1.1\r\n\r\n").await.unwrap();
        let mut reply = String::new();
        c.read_to_string(&mut reply).await.unwrap();
        assert!(reply.starts_with("HTTP/1.1 404"), "{reply}");
        assert!(!*rx.borrow());
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"POST /stop HTTP/1.1\r\n\r\n").await.unwrap();
        let mut reply = String::new();
        c.read_to_string(&mut reply).await.unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        rx.changed().await.unwrap();
        assert!(*rx.borrow());
    }
}
