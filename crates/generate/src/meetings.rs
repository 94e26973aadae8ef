//! The `meetings` and `meeting_notes` collections: meetings with their
//! attendees, and the notes and transcripts written after them.

use std::io::{self, Write};

use super::clock::Clock;
use super::context::WriterContext;
use super::plan::Plan;
use super::text::{meeting_summary, meeting_title, transcript_line};
use super::timestamp::{DAY, HOUR, RANGE_END, RANGE_START, Ts};
use super::world::{Company, Person, World, new_person};

/// What meeting notes need to know about a meeting.
pub(super) struct MeetingInfo {
    id: u128,
    start: i64,
    end: Option<i64>,
    speakers: Vec<String>,
}

/// Writes `meetings` and returns what the meeting notes need about them.
pub(super) fn write_meetings<W: Write>(
    ctx: &mut WriterContext,
    world: &World,
    plan: &Plan,
    w: &mut W,
) -> io::Result<Vec<MeetingInfo>> {
    let clock = Clock::new(
        &mut ctx.rng,
        RANGE_START + 20 * DAY,
        RANGE_END - 5 * DAY,
        plan.meetings,
        10,
    );
    let mut meetings = Vec::with_capacity(plan.meetings);
    ctx.write_stamped("meetings", &clock, w, |ctx, _, start| {
        let company = world.company(&mut ctx.rng);
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.uuid_field("company_id", company.id);
        ctx.text_field("title", |rng, s| {
            meeting_title(rng, s, &company.name, world.short_name)
        });
        ctx.ts_field("start_time", start);
        let minutes = *ctx.rng.pick(&[30, 45, 60, 60, 90]);
        let end = if ctx.rng.percent(10) {
            None
        } else {
            Some(start.secs + minutes * 60)
        };
        ctx.json.key("end_time");
        match end {
            Some(end) => {
                let ts = Ts { secs: end, ..start };
                ctx.json.timestamp(ts);
            }
            None => ctx.json.null(),
        }
        let speakers = write_attendees(ctx, world, company);
        let created = Ts::random(&mut ctx.rng, start.secs - 21 * DAY, start.secs - HOUR);
        ctx.ts_field("created_at", created);
        let updated = Ts::random(&mut ctx.rng, created.secs, start.secs + DAY);
        ctx.ts_field("updated_at", updated);
        meetings.push(MeetingInfo {
            id,
            start: start.secs,
            end,
            speakers,
        });
    })?;
    Ok(meetings)
}

/// Writes `attendees` (exactly one organizer) and returns the names of those who speak.
fn write_attendees(ctx: &mut WriterContext, world: &World, company: &Company) -> Vec<String> {
    let mut people: Vec<Person> = Vec::new();
    for _ in 0..ctx.rng.between(1, 2) {
        people.push(ctx.rng.pick(&world.users).person.clone());
    }
    for founder in &company.founders {
        if ctx.rng.percent(70) {
            people.push(founder.clone());
        }
    }
    if ctx.rng.percent(30) {
        people.push(new_person(&mut ctx.rng, &company.domain));
    }
    let organizer = ctx.rng.index(people.len());
    ctx.json.key("attendees");
    ctx.json.begin_array();
    let mut speakers = Vec::with_capacity(people.len());
    for (i, person) in people.iter().enumerate() {
        ctx.json.begin_object();
        ctx.str_field("email", &person.email);
        ctx.json.key("organizer");
        ctx.json.boolean(i == organizer);
        if i == organizer || ctx.rng.percent(80) {
            ctx.str_field("name", &person.name);
        }
        ctx.json.end_object();
        speakers.push(person.name.clone());
    }
    ctx.json.end_array();
    speakers
}

/// Writes `meeting_notes`: none, one or two per meeting; returns how many there are.
pub(super) fn write_meeting_notes<W: Write>(
    ctx: &mut WriterContext,
    meetings: &[MeetingInfo],
    plan: &Plan,
    w: &mut W,
) -> io::Result<u64> {
    ctx.begin_collection("meeting_notes");
    let mut count = 0;
    for meeting in meetings {
        let notes = ctx.rng.weighted(&[(0u64, 15), (1, 65), (2, 20)]);
        let mut previous: Option<Ts> = None;
        for _ in 0..notes {
            let ended = meeting.end.unwrap_or(meeting.start + HOUR);
            // A second note sometimes shares the first one's creation instant.
            let created = match previous {
                Some(first) if ctx.rng.percent(30) => first.restyled(&mut ctx.rng),
                _ => Ts::after(&mut ctx.rng, ended, 5 * 60, 3 * HOUR),
            };
            previous = Some(created);
            write_meeting_note(ctx, meeting, plan, created);
            ctx.end_record(w)?;
            count += 1;
        }
    }
    ctx.json.end_array();
    Ok(count)
}

/// Which of a meeting note's `notes` and `transcript` are present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NoteShape {
    Both,
    NotesOnly,
    TranscriptOnly,
}

/// Writes one meeting note record (left open for the caller to close).
fn write_meeting_note(ctx: &mut WriterContext, meeting: &MeetingInfo, plan: &Plan, created: Ts) {
    let id = ctx.rng.uuid();
    ctx.begin_record(id);
    ctx.uuid_field("meeting_id", meeting.id);
    ctx.str_field("type", "notetool");
    let shape = ctx.rng.weighted(&[
        (NoteShape::Both, 65),
        (NoteShape::NotesOnly, 15),
        (NoteShape::TranscriptOnly, 20),
    ]);
    ctx.json.key("notes");
    if shape == NoteShape::TranscriptOnly {
        ctx.json.null();
    } else {
        ctx.text.clear();
        meeting_summary(&mut ctx.rng, &mut ctx.text);
        ctx.json.string(&ctx.text);
    }
    ctx.json.key("transcript");
    if shape == NoteShape::NotesOnly {
        ctx.json.null();
    } else {
        write_transcript(ctx, meeting, plan);
    }
    let updated = Ts::after(&mut ctx.rng, created.secs, 0, 2 * DAY);
    ctx.json.key("synced_at");
    if ctx.rng.percent(20) {
        ctx.json.null();
    } else {
        ctx.json.timestamp(updated.restyled(&mut ctx.rng));
    }
    ctx.ts_field("created_at", created);
    ctx.ts_field("updated_at", updated);
}

/// Writes a transcript object whose segments have increasing start and end times.
fn write_transcript(ctx: &mut WriterContext, meeting: &MeetingInfo, plan: &Plan) {
    ctx.json.begin_object();
    ctx.json.key("segments");
    ctx.json.begin_array();
    let mut time = ctx.rng.between_i64(0, 400);
    for _ in 0..ctx.rng.in_range(plan.segments) {
        let start = time + ctx.rng.between_i64(0, 150);
        let end = start + ctx.rng.between_i64(150, 2_500);
        time = end;
        ctx.json.begin_object();
        ctx.text_field("text", transcript_line);
        if ctx.rng.percent(95) {
            let speaker = ctx.rng.pick(&meeting.speakers);
            ctx.str_field("speaker", speaker);
        }
        if ctx.rng.percent(97) {
            ctx.json.key("startTime");
            ctx.json.hundredths(start);
            ctx.json.key("endTime");
            ctx.json.hundredths(end);
        }
        ctx.json.end_object();
    }
    ctx.json.end_array();
    ctx.json.end_object();
}
