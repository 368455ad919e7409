//! `spate send/get --json=events`: one JSON object per line on stdout, for automation —
//! "start", "progress" (every 500 ms), "file" (each entry delivered), then "done" with the
//! statistics, or "error" with the message and the exit code (written by `main`).

use std::time::Duration;

use spate::report::Report;

/// `send --json=events`: one JSON object per line on stdout.
pub(crate) struct Events {
    names: Vec<String>,
    total: u64,
    started: std::time::Instant,
    last: Option<std::time::Instant>,
    /// Entries already reported delivered.
    reported: Vec<bool>,
    holdups: spate::progress::Holdups,
}

impl Events {
    pub(crate) fn new(names: Vec<String>, total: u64) -> Events {
        Events::emit(serde_json::json!({"event": "start", "entries": names.len(), "bytes": total}));
        let n = names.len();
        Events {
            names,
            total,
            started: std::time::Instant::now(),
            last: None,
            reported: vec![false; n],
            holdups: Default::default(),
        }
    }

    pub(crate) fn emit(v: serde_json::Value) {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    }

    /// Called every 100 ms with the sender: file events as they happen, progress every 500 ms.
    pub(crate) fn progress(&mut self, s: &spate_proto::Sender) {
        for (i, seen) in self.reported.iter_mut().enumerate() {
            if !*seen && s.is_delivered(i as u32 + 1) {
                *seen = true;
                Events::emit(serde_json::json!({"event": "file", "path": self.names[i]}));
            }
        }
        let now = std::time::Instant::now();
        if self
            .last
            .is_some_and(|l| now.duration_since(l) < Duration::from_millis(500))
        {
            return;
        }
        self.last = Some(now);
        let st = s.stats();
        let bytes = st.delivered_bytes + st.resumed_bytes;
        let secs = now.duration_since(self.started).as_secs_f64().max(1e-3);
        let rate = st.delivered_bytes as f64 * 8.0 / secs;
        let eta = (rate > 0.0).then(|| (self.total.saturating_sub(bytes)) as f64 * 8.0 / rate);
        let (files_done, files) = s.entries_delivered();
        let waiting = self.holdups.sample(s);
        Events::emit(serde_json::json!({
            "event": "progress", "bytes": bytes, "total_bytes": self.total,
            "files_done": files_done, "files": files, "rate_bps": rate,
            "eta_s": eta, "rtt_ms": s.rtt().smoothed().as_secs_f64() * 1e3,
            "waiting_for": waiting.map(|w| w.0), "waiting_share": waiting.map(|w| w.1),
            "mode": s.rate_mode().name(),
        }));
    }

    pub(crate) fn done(&mut self, report: &Report) {
        let mut v = serde_json::to_value(report).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("event".into(), "done".into());
        }
        Events::emit(v);
    }
}

/// `get --json=events`: the same events, from the receiving end's reports.
pub(crate) struct GetEvents {
    started: std::time::Instant,
    announced: bool,
    last: Option<std::time::Instant>,
}

impl GetEvents {
    /// Events of a download that starts now.
    pub(crate) fn new() -> GetEvents {
        GetEvents {
            started: std::time::Instant::now(),
            announced: false,
            last: None,
        }
    }

    /// Called about every 100 ms with what the receiving end holds.
    pub(crate) fn received(&mut self, r: &spate::serve::Received) {
        let now = std::time::Instant::now();
        let started = self.started;
        if !self.announced && r.entries > 0 {
            self.announced = true;
            Events::emit(
                serde_json::json!({"event": "start", "entries": r.entries, "bytes": r.total}),
            );
        }
        for p in &r.placed_paths {
            Events::emit(serde_json::json!({"event": "file", "path": p}));
        }
        if r.sessions == 0
            || self
                .last
                .is_some_and(|l| now.duration_since(l) < Duration::from_millis(500))
        {
            return;
        }
        self.last = Some(now);
        let secs = now.duration_since(started).as_secs_f64().max(1e-3);
        let rate = r.bytes as f64 * 8.0 / secs;
        let eta = (rate > 0.0 && r.total > 0)
            .then(|| r.total.saturating_sub(r.bytes) as f64 * 8.0 / rate);
        Events::emit(serde_json::json!({
            "event": "progress", "bytes": r.bytes, "total_bytes": r.total,
            "files_done": r.placed, "files": r.entries, "rate_bps": rate, "eta_s": eta,
        }));
    }

    /// The download's statistics (`serve --json`'s fields) as the "done" event.
    pub(crate) fn done(&mut self, log: &spate::serve::SessionLog) {
        let mut v: serde_json::Value =
            serde_json::from_str(&super::session_json(log)).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("event".into(), "done".into());
        }
        Events::emit(v);
    }
}
