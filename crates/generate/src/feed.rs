//! The `feed` collection: news about portfolio companies, with its sources.

use std::io::{self, Write};

use super::clock::Clock;
use super::context::WriterContext;
use super::plan::Plan;
use super::text::{feed_title, sentences};
use super::timestamp::{DAY, Ts};
use super::world::{Company, World};

/// Writes `feed` and returns how many entries there are.
pub(super) fn write_feed<W: Write>(
    ctx: &mut WriterContext,
    world: &World,
    plan: &Plan,
    w: &mut W,
) -> io::Result<u64> {
    let run_start = plan.feed / 3;
    let clock = Clock::whole_range_shared_first(&mut ctx.rng, plan.feed)
        .with_run(run_start, plan.feed_tie_run.min(plan.feed - run_start));
    ctx.write_stamped("feed", &clock, w, |ctx, _, published| {
        let company = world.company(&mut ctx.rng);
        let kind = ctx.rng.weighted(&[
            ("product-update", 35),
            ("fundraise-announcement", 15),
            ("hiring", 30),
            ("press", 20),
        ]);
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.uuid_field("company_id", company.id);
        ctx.str_field("type", kind);
        ctx.text_field("title", |rng, s| feed_title(rng, s, kind, &company.name));
        ctx.text_field("content", |rng, s| sentences(rng, s, 2, 5));
        ctx.ts_field("published_at", published);
        let private = ctx.rng.percent(30);
        ctx.json.key("private");
        ctx.json.boolean(private);
        write_feed_sources(ctx, company, published.secs, private);
    })
}

/// Writes the `sources` of one feed entry: zero to three links.
fn write_feed_sources(ctx: &mut WriterContext, company: &Company, published: i64, private: bool) {
    ctx.json.key("sources");
    ctx.json.begin_array();
    for _ in 0..ctx.rng.below(4) {
        let source = if private {
            ctx.rng.word(&["email", "document"])
        } else {
            ctx.rng.word(&["professional_network", "x", "news", "blog"])
        };
        let id = ctx.rng.next_u64() >> 4;
        let url = match source {
            "professional_network" => {
                format!("https://www.linkedin.com/feed/update/urn:li:activity:{id}")
            }
            "x" => format!("https://x.com/{}/status/{id}", company.slug),
            "news" => format!(
                "https://{}/{}/{}-{id:x}",
                ctx.rng.pick(&[
                    "techcrunch.com",
                    "sifted.eu",
                    "handelsblatt.com",
                    "reuters.com"
                ]),
                ctx.rng.word(&["startups", "venture", "tech", "business"]),
                company.slug
            ),
            "blog" => format!("https://{}/blog/{id:x}", company.domain),
            _ => format!("https://files.{}/d/{id:x}", company.domain),
        };
        ctx.json.begin_object();
        ctx.str_field("source", source);
        ctx.str_field("url", &url);
        ctx.text_field("title", |rng, s| feed_title(rng, s, "press", &company.name));
        let published = Ts::random(&mut ctx.rng, published - 3 * DAY, published + 1);
        ctx.ts_field("published_at", published);
        ctx.json.end_object();
    }
    ctx.json.end_array();
}
