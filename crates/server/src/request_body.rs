//! Reading an admission request's body into memory: the media type checked first, the size
//! cap (a declared Content-Length over it is refused before a byte is read), and every byte
//! reserved from the shared body budget before it is buffered: the declared length at once, a
//! body of unknown length as its buffer grows. Never buffers a byte it has not reserved, never
//! reads past the cap.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use http_body_util::BodyExt as _;
use tokio::time::Instant;

use crate::body_budget::{BodyBudget, Reservation};
use crate::rejection::Rejection;

/// The body, and the bytes it holds in the budget (released when dropped).
pub(crate) struct ReadBody {
    pub bytes: Bytes,
    pub reservation: Reservation,
}

pub(crate) async fn read(
    headers: &HeaderMap,
    body: Body,
    max: usize,
    budget: &BodyBudget,
    deadline: Instant,
) -> Result<ReadBody, Rejection> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(Rejection::UnsupportedMediaType(content_type));
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let declared = match declared.map(usize::try_from) {
        None => None,
        Some(Ok(len)) if len <= max => Some(len),
        Some(_) => return Err(Rejection::TooLarge(max)),
    };
    let over_budget = |e: crate::body_budget::OverBudget| Rejection::OverBudget(e.total);
    let mut reservation = budget
        .reserve(declared.unwrap_or(0), deadline)
        .await
        .map_err(over_budget)?;
    let mut buffer = Vec::with_capacity(declared.unwrap_or(0));
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Rejection::BodyUnreadable(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let needed = buffer.len() + data.len();
        if needed > max {
            return Err(Rejection::TooLarge(max));
        }
        if needed > reservation.bytes() {
            // Unknown length: grow by doubling, as Vec would, but reserve the growth first.
            let capacity = needed.max(reservation.bytes().saturating_mul(2)).min(max);
            reservation
                .grow(capacity - reservation.bytes(), deadline)
                .await
                .map_err(over_budget)?;
            buffer.reserve_exact(capacity - buffer.len());
        }
        buffer.extend_from_slice(&data);
    }
    if buffer.iter().all(u8::is_ascii_whitespace) {
        return Err(Rejection::Empty);
    }
    Ok(ReadBody {
        bytes: Bytes::from(buffer),
        reservation,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::http::HeaderValue;
    use prometheus_client::metrics::gauge::Gauge;

    use super::*;

    fn headers(length: Option<usize>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(length) = length {
            headers.insert(header::CONTENT_LENGTH, length.into());
        }
        headers
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    /// A body that arrives in `pieces` frames, of unknown length.
    fn streamed(pieces: &[&'static [u8]]) -> Body {
        let frames: Vec<Result<Bytes, std::io::Error>> =
            pieces.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        Body::from_stream(futures::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_declared_length_is_reserved_whole_and_given_back() {
        let gauge = Gauge::default();
        let budget = BodyBudget::new(100, gauge.clone());
        let read = read(
            &headers(Some(10)),
            Body::from("{\"a\":1}   "),
            50,
            &budget,
            soon(),
        )
        .await
        .unwrap();
        assert_eq!(read.bytes.as_ref(), b"{\"a\":1}   ");
        assert_eq!((read.reservation.bytes(), gauge.get()), (10, 10));
        drop(read);
        assert_eq!(gauge.get(), 0);
    }

    #[tokio::test]
    async fn an_unknown_length_is_reserved_as_it_arrives() {
        let budget = BodyBudget::new(100, Gauge::default());
        let body = streamed(&[b"{\"a\":", b"[1,2,3,4,5,6,7,8,9]", b"}"]);
        let read = read(&headers(None), body, 50, &budget, soon())
            .await
            .unwrap();
        assert_eq!(read.bytes.as_ref(), b"{\"a\":[1,2,3,4,5,6,7,8,9]}");
        // Grown as Vec grows, reserved before each step: 5 bytes for the first frame, 24 for
        // the second (more than double), then double, 48, for the last byte.
        assert_eq!(read.reservation.bytes(), 48);

        // Past the cap, refused while reading.
        let body = streamed(&[b"[1,2,3,4,5,6,7,8,9", b",10,11,12,13,14,15]"]);
        let refused = read_err(&headers(None), body, 20, &budget).await;
        assert!(matches!(refused, Rejection::TooLarge(20)), "{refused:?}");
    }

    #[tokio::test]
    async fn a_full_budget_is_waited_for_until_the_deadline() {
        let budget = BodyBudget::new(100, Gauge::default());
        let held = budget.reserve(95, soon()).await.unwrap();
        let refused = read_err(&headers(Some(10)), Body::from("0123456789"), 50, &budget).await;
        assert!(matches!(refused, Rejection::OverBudget(100)), "{refused:?}");
        let body = streamed(&[b"[1,2,3]", b"  "]);
        let refused = read_err(&headers(None), body, 50, &budget).await;
        assert!(matches!(refused, Rejection::OverBudget(100)), "{refused:?}");
        drop(held);
        let body = Body::from("0123456789");
        assert!(
            read(&headers(Some(10)), body, 50, &budget, soon())
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn refusals_that_need_no_body_reserve_nothing() {
        let gauge = Gauge::default();
        let budget = BodyBudget::new(100, gauge.clone());
        let refused = read_err(&headers(Some(51)), Body::from("x"), 50, &budget).await;
        assert!(matches!(refused, Rejection::TooLarge(50)), "{refused:?}");
        let mut text = headers(Some(2));
        text.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        let refused = read_err(&text, Body::from("{}"), 50, &budget).await;
        assert!(
            matches!(refused, Rejection::UnsupportedMediaType(_)),
            "{refused:?}"
        );
        let refused = read_err(&headers(Some(3)), Body::from(" \n "), 50, &budget).await;
        assert!(matches!(refused, Rejection::Empty), "{refused:?}");
        assert_eq!(gauge.get(), 0);
    }

    /// Reads with a deadline that has already passed: whatever must wait is refused at once.
    async fn read_err(
        headers: &HeaderMap,
        body: Body,
        max: usize,
        budget: &BodyBudget,
    ) -> Rejection {
        match read(headers, body, max, budget, Instant::now()).await {
            Ok(read) => panic!("read {} bytes", read.bytes.len()),
            Err(rejection) => rejection,
        }
    }
}
