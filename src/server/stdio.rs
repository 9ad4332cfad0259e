//! `trajwiki mcp`'s standard input and output, with each line checked before the MCP service
//! reads it. The `rmcp` transport drops a line that is not JSON (or not UTF-8) without a word;
//! here such a line is answered with a JSON-RPC parse error (`-32700`, `id: null`, the reason
//! in its message), as JSON-RPC 2.0 asks, and the service reads only well-formed lines. One
//! writer puts both the service's messages and these errors on standard output, a line at a
//! time, so they never interleave.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest line taken (`rmcp`'s own bound); a longer one is answered with a parse error.
const MAX_LINE: usize = 16 << 20;

/// The bytes buffered between the line checker, the service and the writer.
const PIPE: usize = 1 << 16;

/// The service's side of checked standard streams: what it reads, what it writes, and the task
/// that writes standard output (done once both the service's writer and the checker are).
pub(super) struct CheckedStdio {
    /// The well-formed lines of standard input.
    pub(super) read: DuplexStream,
    /// The service's messages, for standard output.
    pub(super) write: DuplexStream,
    /// Writes standard output until the service and the checker are both done.
    pub(super) output: JoinHandle<()>,
}

/// Starts the line checker and the writer on the current runtime.
pub(super) fn checked_stdio() -> CheckedStdio {
    let (lines, mut lines_out) = mpsc::channel::<Vec<u8>>(64);
    let (mut to_service, service_reads) = tokio::io::duplex(PIPE);
    let (service_writes, from_service) = tokio::io::duplex(PIPE);

    let errors = lines.clone();
    tokio::spawn(async move {
        let mut input = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        loop {
            match read_line(&mut input, &mut line).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::TooLong) => {
                    let reason = format!("the line is longer than {MAX_LINE} bytes");
                    if errors.send(parse_error(&reason)).await.is_err() {
                        break;
                    }
                }
                Ok(Line::Read) => match checked(&line) {
                    Ok(None) => {}
                    Ok(Some(text)) => {
                        let mut message = text.as_bytes().to_vec();
                        message.push(b'\n');
                        if to_service.write_all(&message).await.is_err() {
                            break;
                        }
                    }
                    Err(reason) => {
                        if errors.send(parse_error(&reason)).await.is_err() {
                            break;
                        }
                    }
                },
            }
        }
        // Dropping `to_service` ends the service's input.
    });

    tokio::spawn(async move {
        let mut messages = BufReader::new(from_service);
        loop {
            let mut message = Vec::new();
            match messages.read_until(b'\n', &mut message).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if lines.send(message).await.is_err() {
                        break;
                    }
                }
            }
        }
    });

    let output = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut message) = lines_out.recv().await {
            if !message.ends_with(b"\n") {
                message.push(b'\n');
            }
            if stdout.write_all(&message).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });

    CheckedStdio {
        read: service_reads,
        write: service_writes,
        output,
    }
}

/// What [`read_line`] read.
enum Line {
    /// A line (its newline taken off) is in the buffer.
    Read,
    /// A line past [`MAX_LINE`], skipped to its end.
    TooLong,
    /// The end of the input.
    End,
}

/// Reads one line into `line` (cleared first) without holding more than [`MAX_LINE`] bytes.
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            // A last line without its newline is a line all the same.
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Read,
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        if !too_long {
            let part = &available[..newline.unwrap_or(available.len())];
            if line.len() + part.len() > MAX_LINE {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(part);
            }
        }
        input.consume(take);
        if newline.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

/// A line's JSON text, `None` for a blank line (skipped, as the service skips it), or why it
/// is no JSON message.
fn checked(line: &[u8]) -> Result<Option<&str>, String> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let text = std::str::from_utf8(line).map_err(|e| {
        format!(
            "the line is not UTF-8 (an invalid byte at offset {})",
            e.valid_up_to()
        )
    })?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map_err(|e| format!("the line is not JSON: {e}"))?;
    Ok(Some(text))
}

/// A JSON-RPC parse error answer (to no id: the request's could not be read).
fn parse_error(reason: &str) -> Vec<u8> {
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: {reason}")},
    });
    let mut out = answer.to_string().into_bytes();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_checked() {
        assert_eq!(checked(b"{\"a\": 1}\r"), Ok(Some("{\"a\": 1}")));
        assert_eq!(checked(b"  "), Ok(None));
        assert!(checked(b"{\"a\": ").unwrap_err().contains("not JSON"));
        assert!(checked(b"{\"a\": \"\xff\"}")
            .unwrap_err()
            .contains("not UTF-8"));
    }

    #[tokio::test]
    async fn long_lines_are_skipped_whole() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{}\nlast");
        let mut reader = BufReader::new(&input[..]);
        let mut line = Vec::new();
        assert!(matches!(
            read_line(&mut reader, &mut line).await.unwrap(),
            Line::TooLong
        ));
        assert!(matches!(
            read_line(&mut reader, &mut line).await.unwrap(),
            Line::Read
        ));
        assert_eq!(line, b"{}");
        assert!(matches!(
            read_line(&mut reader, &mut line).await.unwrap(),
            Line::Read
        ));
        assert_eq!(line, b"last");
        assert!(matches!(
            read_line(&mut reader, &mut line).await.unwrap(),
            Line::End
        ));
    }
}
