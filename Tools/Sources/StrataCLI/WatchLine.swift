import Foundation
import Strata
import StrataQueries

/// One line of `strata watch`: a snapshot of the live query as a person reads it, or as one JSON
/// object a script reads.
///
/// ```
/// 12:00:00  empty  fetching (first observer)
/// 12:00:00  value  idle  remote, age 0s  1,234 bytes
/// 12:00:10  value  paused (offline)  stale cache, age 10s  1,234 bytes  1 failure: could not connect (connection refused)
/// 12:00:20  value  fetching (interval, probe)  stale cache, age 20s  1,234 bytes  1 failure: could not connect (connection refused)
/// ```
struct WatchLine: Sendable, Equatable {
    /// When the line was written, by the watch's clock.
    var time: Date
    /// `empty`, `value` or `failed` (``QuerySnapshot/Status``).
    var status: String
    /// `idle`, `fetching` or `paused`.
    var phase: String
    /// Why the query fetches (`first observer`, `interval`, `reconnect`, …) or waits (`offline`,
    /// `backing off`); `nil` while idle. A load that continues after a pause keeps the reason it
    /// started with.
    var reason: String?
    /// Whether this fetch is a probe: the load paused offline, continued to see whether the server
    /// is back.
    var isProbe: Bool
    /// What the value shown is: `remote` (the server answered the last load), `fresh cache` (a
    /// cached copy younger than `--max-age`), `stale cache` (an older one, or one kept while the
    /// server fails); `nil` without a value.
    var source: String?
    /// The tier that served the value (`remote`, `cache`), from its provenance.
    var tier: String?
    /// The kind of source behind that tier (`remote`, `disk`, `shared cache`), from its provenance.
    var origin: String?
    /// How old the value is now: the time since its tier stored it, so it grows while the server
    /// is away.
    var age: Duration?
    /// When the value's tier stored it.
    var storedAt: Date?
    /// The size of the body shown.
    var bytes: Int?
    /// Whether the value is at least `--max-age` old (a load would ask the server); `nil` without
    /// a value.
    var isStale: Bool?
    /// The loads that failed in a row (0 after a success).
    var failureCount: Int
    /// The last load's failure in a few words, until a load succeeds.
    var error: String?

    /// The line for `snapshot` at `now`; `maxAge` decides ``isStale``, `probe` is ``isProbe``.
    init(_ snapshot: QuerySnapshot<Data>, now: Date, maxAge: Duration, probe: Bool = false) {
        time = now
        status = snapshot.status.rawValue
        switch snapshot.phase {
        case .idle: (phase, reason) = ("idle", nil)
        case .fetching(let why): (phase, reason) = ("fetching", why.description)
        case .paused(let why): (phase, reason) = ("paused", why.description)
        }
        let provenance = snapshot.value == nil ? nil : snapshot.provenance
        tier = provenance?.tier
        origin = provenance.map { "\($0.origin)" }
        storedAt = snapshot.value == nil ? nil : snapshot.storedAt
        age = storedAt.map { Duration.seconds(max(0, now.timeIntervalSince($0))) } ?? provenance?.age
        bytes = snapshot.value?.count
        isStale = age.map { $0 >= maxAge }
        isProbe = probe && snapshot.isFetching
        failureCount = snapshot.failureCount
        error = snapshot.lastError.map { Fetcher.shortReason($0.underlying) }
        if let provenance {
            source = provenance.origin == .remote && snapshot.lastError == nil ? "remote" : (isStale ?? true) ? "stale cache" : "fresh cache"
        } else {
            source = nil
        }
    }

    /// Whether the line says nothing yet: no value, no failure, no load (the query before its first
    /// observer counts). `strata watch` does not print it.
    var isBlank: Bool { status == "empty" && phase == "idle" && failureCount == 0 }

    /// The line for people: time (local), status, phase and why, what is shown and how old, size,
    /// failures.
    var text: String {
        let why = isProbe ? (reason.map { "\($0), probe" } ?? "probe") : reason
        var fields = [Self.clockTime(time), status, why.map { "\(phase) (\($0))" } ?? phase]
        if let source {
            fields.append(age.map { "\(source), age \(Self.roundedToSeconds($0).formattedAge)" } ?? source)
        }
        if let bytes { fields.append(Self.byteCount(bytes)) }
        if failureCount > 0 {
            let failures = failureCount == 1 ? "1 failure" : "\(failureCount) failures"
            fields.append(error.map { "\(failures): \($0)" } ?? failures)
        }
        return fields.joined(separator: "  ")
    }

    /// The line for scripts: one JSON object, every key always present (`null` when it does not
    /// apply), keys sorted.
    var json: String {
        let iso = ISO8601DateFormatter()
        iso.formatOptions.insert(.withFractionalSeconds)
        let object: [String: Any] = [
            "time": iso.string(from: time),
            "status": status,
            "phase": phase,
            "reason": reason ?? NSNull(),
            "probe": isProbe,
            "source": source ?? NSNull(),
            "tier": tier ?? NSNull(),
            "origin": origin ?? NSNull(),
            "ageSeconds": age.map { ($0 / .milliseconds(1)).rounded() / 1000 } ?? NSNull(),
            "storedAt": storedAt.map { iso.string(from: $0) } ?? NSNull(),
            "bytes": bytes ?? NSNull(),
            "stale": isStale ?? NSNull(),
            "failureCount": failureCount,
            "error": error ?? NSNull(),
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// `HH:mm:ss` in the local time zone.
    static func clockTime(_ date: Date) -> String {
        let parts = Calendar.current.dateComponents([.hour, .minute, .second], from: date)
        return String(format: "%02d:%02d:%02d", parts.hour ?? 0, parts.minute ?? 0, parts.second ?? 0)
    }

    /// `duration` to the nearest second (an age for people: `0s`, not `3ms`; `1s`, not `0s`, for
    /// a copy fetched 998 ms ago).
    static func roundedToSeconds(_ duration: Duration) -> Duration {
        .seconds(Int64((duration / .seconds(1)).rounded()))
    }

    /// `1 byte`, `512 bytes`, `1,234,567 bytes`: exact, so a change of a few bytes shows.
    static func byteCount(_ bytes: Int) -> String {
        guard bytes != 1 else { return "1 byte" }
        var digits = String(bytes)
        var groups: [Substring] = []
        while digits.count > 3 {
            groups.insert(digits.suffix(3), at: 0)
            digits.removeLast(3)
        }
        groups.insert(Substring(digits), at: 0)
        return groups.joined(separator: ",") + " bytes"
    }
}
