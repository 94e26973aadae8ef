//! The API's route table: every route, its label in metrics and logs, and
//! which route a path names (docs/api.md#endpoints).

/// The one list of routes: each with its label, from which the enum,
/// [`Route::ALL`], [`Route::LABELS`] and [`Route::label`] are made, so a
/// new route is one line here; the compiler then points at the `match`es
/// that must answer it (`api::endpoint`).
macro_rules! routes {
    ($($(#[$doc:meta])* $variant:ident => $label:literal),* $(,)?) => {
        /// Every route the API answers.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Route {
            $($(#[$doc])* $variant),*
        }

        impl Route {
            /// Every route, in the order of [`Route::LABELS`].
            pub const ALL: [Route; [$($label),*].len()] = [$(Route::$variant),*];

            /// Every route's label, in the order of [`Route::ALL`]: the
            /// metrics are made with this list, and a route is reported by
            /// its [`Route::index`].
            pub const LABELS: [&'static str; Route::ALL.len()] = [$($label),*];

            /// The route as the API documents it.
            pub const fn label(self) -> &'static str {
                match self {
                    $(Route::$variant => $label),*
                }
            }
        }
    };
}

routes! {
    Portfolio => "/portfolio",
    Company => "/portfolio/{id}",
    CompanyTasks => "/portfolio/{id}/tasks",
    CompanyRoles => "/portfolio/{id}/roles",
    CompanyNotes => "/portfolio/{id}/notes",
    CompanyMetrics => "/portfolio/{id}/metrics",
    /// An extension of the spec (docs/api.md#endpoints).
    CompanyMeetings => "/portfolio/{id}/meetings",
    Tasks => "/tasks",
    Task => "/tasks/{id}",
    Roles => "/roles",
    Note => "/notes/{id}",
    Feed => "/feed",
    Meeting => "/meetings/{id}",
    Health => "/healthz",
    Ready => "/readyz",
    OpenApi => "/openapi.json",
    /// Unknown paths, and paths with an empty segment. A request refused
    /// on a known path (405, 401, 503) keeps that path's route.
    Other => "other",
}

impl Route {
    /// The route's position in [`Route::ALL`] and [`Route::LABELS`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The route of a path, and the id segment it carries (or `""`). A path
    /// with an empty segment (`/tasks/`, `/portfolio//tasks`) names no route.
    pub fn classify(path: &str) -> (Route, &str) {
        if path.len() > 1 && path[1..].split('/').any(str::is_empty) {
            return (Route::Other, "");
        }
        let mut segments = path.strip_prefix('/').unwrap_or(path).split('/');
        let parts = (
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
        );
        match parts {
            (Some("portfolio"), None, ..) => (Route::Portfolio, ""),
            (Some("portfolio"), Some(id), None, _) => (Route::Company, id),
            (Some("portfolio"), Some(id), Some(sub), None) => match sub {
                "tasks" => (Route::CompanyTasks, id),
                "roles" => (Route::CompanyRoles, id),
                "notes" => (Route::CompanyNotes, id),
                "metrics" => (Route::CompanyMetrics, id),
                "meetings" => (Route::CompanyMeetings, id),
                _ => (Route::Other, ""),
            },
            (Some("tasks"), None, ..) => (Route::Tasks, ""),
            (Some("tasks"), Some(id), None, _) => (Route::Task, id),
            (Some("roles"), None, ..) => (Route::Roles, ""),
            (Some("notes"), Some(id), None, _) => (Route::Note, id),
            (Some("feed"), None, ..) => (Route::Feed, ""),
            (Some("meetings"), Some(id), None, _) => (Route::Meeting, id),
            (Some("healthz"), None, ..) => (Route::Health, ""),
            (Some("readyz"), None, ..) => (Route::Ready, ""),
            (Some("openapi.json"), None, ..) => (Route::OpenApi, ""),
            _ => (Route::Other, ""),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Route;

    #[test]
    fn the_table_lists_every_route_once_in_order() {
        for (i, route) in Route::ALL.into_iter().enumerate() {
            assert_eq!(route.index(), i, "{route:?}");
            assert_eq!(Route::LABELS[i], route.label());
        }
    }

    #[test]
    fn paths_name_their_routes() {
        let id = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f";
        for (path, route, got_id) in [
            ("/portfolio", Route::Portfolio, ""),
            (
                &format!("/portfolio/{id}/tasks") as &str,
                Route::CompanyTasks,
                id,
            ),
            (&format!("/meetings/{id}"), Route::Meeting, id),
            (
                &format!("/portfolio/{id}/meetings"),
                Route::CompanyMeetings,
                id,
            ),
            ("/tasks/", Route::Other, ""),
            ("/portfolio//tasks", Route::Other, ""),
            (&format!("/portfolio/{id}/nope"), Route::Other, ""),
            ("/", Route::Other, ""),
        ] {
            assert_eq!(Route::classify(path), (route, got_id), "{path}");
        }
    }
}
