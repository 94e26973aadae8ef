//! The `roles` collection: open positions at portfolio companies.

use std::io::{self, Write};

use super::clock::Clock;
use super::context::WriterContext;
use super::plan::Plan;
use super::rng::Rng;
use super::text::sentences;
use super::timestamp::{DAY, RANGE_END, RANGE_START};
use super::words::{ENGINEERING_ROLES, SALES_ROLES, SENIORITY};
use super::world::{World, ascii_slug};

/// Writes `roles` and returns how many there are.
pub(super) fn write_roles<W: Write>(
    ctx: &mut WriterContext,
    world: &World,
    plan: &Plan,
    w: &mut W,
) -> io::Result<u64> {
    let clock = Clock::new(
        &mut ctx.rng,
        RANGE_START + 400 * DAY,
        RANGE_END,
        plan.roles,
        30,
    );
    ctx.write_stamped("roles", &clock, w, |ctx, _, opened| {
        let company = world.company(&mut ctx.rng);
        let (domain, level, title) = role_title(&mut ctx.rng);
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.uuid_field("company_id", company.id);
        ctx.str_field("name", &title);
        let url = format!(
            "https://{}/careers/{}-{}",
            company.domain,
            ascii_slug(&title, "-"),
            1000 + ctx.rng.below(9000)
        );
        ctx.str_field("url", &url);
        ctx.text_field("description", |rng, s| {
            s.push_str("We are looking for a ");
            s.push_str(&title);
            s.push_str(" to join our team. ");
            sentences(rng, s, 1, 3);
        });
        ctx.str_field("domain", domain);
        ctx.str_field("level", level);
        ctx.ts_field("opened_at", opened);
    })
}

/// Returns a role's domain, level and title.
fn role_title(rng: &mut Rng) -> (&'static str, &'static str, String) {
    let domain = rng.weighted(&[("engineering", 50), ("sales", 30), ("product", 20)]);
    let level = rng.weighted(&[("ic", 70), ("manager", 20), ("executive", 10)]);
    let titles: &[&str] = match (domain, level) {
        ("engineering", "ic") => ENGINEERING_ROLES,
        ("engineering", "manager") => &["Engineering Manager", "Head of Platform", "Head of Data"],
        ("engineering", _) => &["VP Engineering", "CTO"],
        ("sales", "ic") => SALES_ROLES,
        ("sales", "manager") => &[
            "Sales Manager, DACH",
            "Head of Partnerships",
            "Sales Manager, Nordics",
        ],
        ("sales", _) => &["VP Sales", "Chief Revenue Officer"],
        (_, "ic") => &[
            "Product Manager",
            "Product Designer",
            "UX Researcher",
            "Product Analyst",
        ],
        (_, "manager") => &["Group Product Manager", "Head of Design"],
        _ => &["VP Product", "Chief Product Officer"],
    };
    let mut title = String::new();
    if level == "ic" {
        let seniority = rng.weighted(&SENIORITY);
        title.push_str(seniority);
    }
    title.push_str(rng.word(titles));
    if rng.percent(15) {
        title.push_str(rng.word(&[" (m/w/d)", " – Remote", " (Zürich)", " – São Paulo"]));
    }
    (domain, level, title)
}
