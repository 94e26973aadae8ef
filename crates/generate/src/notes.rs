//! The `notes` collection.

use std::io::{self, Write};

use super::clock::Clock;
use super::context::WriterContext;
use super::plan::Plan;
use super::text::{note_title, paragraphs};
use super::world::World;

/// Writes `notes` and returns how many there are.
pub(super) fn write_notes<W: Write>(
    ctx: &mut WriterContext,
    world: &World,
    plan: &Plan,
    w: &mut W,
) -> io::Result<u64> {
    let clock = Clock::whole_range_shared_first(&mut ctx.rng, plan.notes);
    ctx.write_stamped("notes", &clock, w, |ctx, index, created| {
        // Every company gets notes; the first rounds go through them in order.
        let company = match world.companies.get(index) {
            Some(company) => company,
            None => world.company(&mut ctx.rng),
        };
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.uuid_field("company_id", company.id);
        ctx.text_field("title", |rng, s| note_title(rng, s, &company.name));
        ctx.text_field("content", |rng, s| {
            paragraphs(rng, s, plan.note_paragraphs, (2, 6));
        });
        let source = ctx.rng.weighted(&[
            ("manual", 55),
            ("email", 20),
            ("meeting", 15),
            ("import", 10),
        ]);
        ctx.str_field("source", source);
        let author = &ctx.rng.pick(&world.users).person.email;
        ctx.str_field("created_by", author);
        ctx.ts_field("created_at", created);
    })
}
