//! Any query string: every accessor answers a bounded value or a 400.

#![no_main]

use libfuzzer_sys::fuzz_target;
use portfolio_replica::api::Query;
use portfolio_domain::store::Cursor;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let query = Query::parse(raw);
    for (max, default) in [(100, 50), (50, 20)] {
        match query.offset_page(max, default) {
            Ok(page) => {
                assert!((1..=max).contains(&page.limit));
                assert!(page.offset <= 9_007_199_254_740_991);
            }
            Err(e) => assert_eq!(e.status.as_u16(), 400),
        }
    }
    match query.feed() {
        Ok(feed) => {
            assert!((1..=50).contains(&feed.limit));
            assert_ne!(feed.kind, Some(""));
            if let Some(cursor) = feed.cursor {
                assert_eq!(Cursor::parse(&cursor.to_string()), Ok(cursor));
            }
        }
        Err(e) => assert_eq!(e.status.as_u16(), 400),
    }
    for name in ["filter[type]", "filter[status]", "filter[priority]"] {
        if let Err(e) = query.filter(name) {
            assert_eq!(e.status.as_u16(), 400);
        }
    }
    let _ = query.include_notes();
    let _ = Cursor::parse(raw);
    let _ = portfolio_domain::store::id::parse_id(raw);
});
