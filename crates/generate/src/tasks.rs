//! The `tasks` collection.

use std::io::{self, Write};

use super::clock::Clock;
use super::context::WriterContext;
use super::plan::Plan;
use super::text::{task_description, task_title};
use super::timestamp::{DAY, LAST_DAY, Ts};
use super::world::World;

/// Writes `tasks` and returns how many there are.
pub(super) fn write_tasks<W: Write>(
    ctx: &mut WriterContext,
    world: &World,
    plan: &Plan,
    w: &mut W,
) -> io::Result<u64> {
    let clock = Clock::whole_range_shared_first(&mut ctx.rng, plan.tasks);
    ctx.write_stamped("tasks", &clock, w, |ctx, _, created| {
        let company = world.company(&mut ctx.rng);
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.text_field("title", task_title);
        ctx.text_field("description", task_description);
        let status = ctx.rng.weighted(&[
            ("triage", 15),
            ("todo", 35),
            ("in_progress", 20),
            ("done", 30),
        ]);
        ctx.str_field("status", status);
        let priority =
            ctx.rng
                .weighted(&[("low", 30), ("medium", 40), ("high", 22), ("urgent", 8)]);
        ctx.str_field("priority", priority);
        let source = ctx.rng.weighted(&[("manual", 70), ("automation", 30)]);
        ctx.str_field("source", source);
        ctx.uuid_field("company_id", company.id);
        ctx.json.key("assignee_id");
        if ctx.rng.percent(6) {
            ctx.json.null();
        } else {
            let user = ctx.rng.pick(&world.users).id;
            ctx.json.uuid(user);
        }
        ctx.json.key("due_date");
        let due = (created.secs + ctx.rng.between_i64(3, 90) * DAY).min(LAST_DAY);
        ctx.json.date(due);
        ctx.ts_field("created_at", created);
        let updated = if ctx.rng.percent(20) {
            created.restyled(&mut ctx.rng)
        } else {
            Ts::after(&mut ctx.rng, created.secs + 1, 60, 45 * DAY)
        };
        ctx.ts_field("updated_at", updated);
    })
}
