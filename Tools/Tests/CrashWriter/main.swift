// A helper process for the crash-safety and store-security tests: it writes self-validating values
// to a store in a loop (until it is killed with SIGKILL, or for `--count` rounds) and reports every
// write on standard output, unbuffered:
//
//     w <seq> <ns>    about to write round <seq> (the write is in flight from here)
//     a <seq> <ns>    round <seq> is acknowledged: every insert of the round returned
//
// <ns> is CLOCK_MONOTONIC in nanoseconds, one clock for every process of the machine: the tests
// order two writers' rounds by it (a round acknowledged before another writer's round began).
//
// Usage:
//     strata-crash-writer --store file|file-limited|sqlite|naive|defaults --path P
//                         [--key K]... [--key-hex HEX]... [--start N] [--count N] [--umask OCTAL]
//                         [--count-limit N] [--byte-limit N] [--watch KEY]
//
// - `file`: `FileStore` (JSON codec, fsync on) in directory P.
// - `file-limited`: `FileStore` in P with `countLimit: 4`; every round also writes a small filler key
//   (`filler-<seq % 8>`), so each round evicts and appends to the index journal.
// - `sqlite`: `SQLiteStore` at file P with `countLimit: 4`, with the same fillers (evictions run in
//   the write transaction).
// - `--count-limit N` and `--byte-limit N` replace those limits (`file-limited`, `sqlite`).
// - `--watch KEY` (the stores): after each acknowledged round, read KEY, another writer process's
//   key, and exit with status 2 when what it holds is torn or older than a round this process saw
//   there before (a read in one process never goes back in time on another's writes). It prints
//   `r <seq>` for each value read (`r -` for none).
// - `naive`: NOT a Strata store. It writes the record's JSON in place at file P (truncate, then 4 KB
//   chunks, each flushed): the negative control that shows the kill loop does catch torn writes.
// - `defaults`: `UserDefaultsStore` in suite P.
// - `outbox-enqueue`: an `Outbox` over a `FileOutboxStorage` in directory P, offline; round `r` queues
//   three HTTP writes at once, from three concurrent tasks (`POST <url>/posts`, each a `CrashPost` as
//   JSON): posts `3r` and `3r+1` into scope `shared` (two writers racing for one scope) and `3r+2`
//   into scope `other`; `a <r>` is printed once all three `enqueue` calls returned. A post's payload
//   is its round's first `CrashPost.maxPayload` bytes: an outbox reads every entry when it opens, so
//   (in a debug build) megabytes of entries would make each relaunch, not the kill, the cost of the
//   loop.
// - `outbox-replay`: the same outbox, online, drained once through `URLSessionHTTPClient` to `--url`;
//   it prints `w <seq>` before each write is sent and `a <seq>` once the server answered 2xx, then
//   `done <delivered>` and exits. (Killed mid-drain, the next run sends what is left.)
//
// Each value is a `CrashRecord`: the sequence number, a payload derived from it (a few bytes to
// ~200 KB, so some writes are long enough to be interrupted mid-file) and the FNV-1a digest of the
// payload. The tests rebuild the payload from the sequence number and check both.
import Foundation
import Strata
import StrataOutbox
import StrataSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One self-validating value.
struct CrashRecord: Codable, Sendable {
    var seq: Int
    var payload: Data
    var digest: String

    init(seq: Int) {
        self.seq = seq
        payload = Self.payload(for: seq)
        digest = Self.digest(of: payload)
    }

    /// The payload of round `seq`: its size and bytes both come from a SplitMix64 seeded with `seq`.
    /// One round in four is 100–200 KB, the rest a few bytes to 40 KB.
    static func payload(for seq: Int) -> Data {
        var state = UInt64(bitPattern: Int64(seq)) &* 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let shape = next()
        let size: Int
        switch shape % 4 {
        case 0: size = 100_000 + Int(next() % 100_001)
        case 1: size = 1 + Int(next() % 64)
        default: size = 64 + Int(next() % 40_000)
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(size + 8)
        while bytes.count < size {
            let word = next()
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return Data(bytes.prefix(size))
    }

    static func digest(of data: Data) -> String {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in data {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        return String(hash, radix: 16)
    }
}

/// The body of an outbox round's write: `title`/`body` as the demo server's `POST /posts` takes them,
/// and the round's self-validating record (its payload cut to ``maxPayload`` bytes).
struct CrashPost: Codable, Sendable {
    static let maxPayload = 512

    var title: String
    var body: String
    var seq: Int
    var payload: Data
    var digest: String

    init(seq: Int) {
        title = "crash-\(seq)"
        self.seq = seq
        payload = CrashRecord(seq: seq).payload.prefix(Self.maxPayload)
        digest = CrashRecord.digest(of: payload)
        body = digest
    }
}

/// Prints `w <seq>` before a write is sent and `a <seq>` when the server accepted it.
struct AnnouncingTransport: HTTPTransport {
    let base: URLSessionHTTPClient

    func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        let seq = body.flatMap { try? JSONDecoder().decode(CrashPost.self, from: $0) }?.seq ?? -1
        emit("w \(seq)\n")
        let reply = try await base.send(request, body: body, options: options)
        if (200..<300).contains(reply.status.code) { emit("a \(seq)\n") }
        return reply
    }
}

/// Writes `text` to `fd` in full, unbuffered (stdio would hold it back when stdout is a pipe).
func emit(_ text: String, to fd: Int32 = 1) {
    var bytes = Array(text.utf8)
    var written = 0
    while written < bytes.count {
        let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
        if n < 0 {
            if errno == EINTR { continue }
            exit(3)
        }
        written += n
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process of the machine.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

func fail(_ message: String) -> Never {
    emit("strata-crash-writer: \(message)\n", to: 2)
    exit(2)
}

// MARK: Stores

/// Writes the record's JSON in place, truncating first and flushing every 4 KB: a torn file whenever
/// it is killed mid-write. Only the negative control uses it.
func writeInPlace(_ record: CrashRecord, at path: String) throws {
    let bytes = try JSONEncoder().encode(record)
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fail("open \(path): errno \(errno)") }
    defer { close(fd) }
    var offset = 0
    while offset < bytes.count {
        let end = min(offset + 4096, bytes.count)
        let n = bytes[offset..<end].withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
        guard n > 0 else { fail("write \(path): errno \(errno)") }
        offset += n
        fsync(fd)
    }
}

/// The outbox scope of post `seq` in the `outbox-enqueue` loop: two of each round's three posts share one.
func crashScope(ofPost seq: Int) -> String {
    seq % 3 == 2 ? "other" : "shared"
}

/// Parses the arguments, opens the store and writes until killed (or `--count` rounds).
func run() async throws {
    var kindArgument: String?
    var pathArgument: String?
    var keys: [String] = []
    var start = 1
    var count: Int?
    var url: URL?
    var countLimit = 4
    var byteLimit: Int?
    var watched: String?
    var arguments = CommandLine.arguments.dropFirst().makeIterator()
    while let flag = arguments.next() {
        guard let value = arguments.next() else { fail("\(flag) needs a value") }
        switch flag {
        case "--store": kindArgument = value
        case "--path": pathArgument = value
        case "--key": keys.append(value)
        case "--key-hex":
            var bytes: [UInt8] = []
            var digits = value.makeIterator()
            while let high = digits.next(), let low = digits.next() {
                guard let byte = UInt8(String([high, low]), radix: 16) else { fail("bad hex in --key-hex") }
                bytes.append(byte)
            }
            guard let key = String(validating: bytes, as: UTF8.self) else { fail("--key-hex is not UTF-8") }
            keys.append(key)
        case "--start": start = Int(value) ?? start
        case "--count": count = Int(value)
        case "--url": url = URL(string: value)
        case "--count-limit": countLimit = Int(value) ?? countLimit
        case "--byte-limit": byteLimit = Int(value)
        case "--watch": watched = value
        case "--umask":
            guard let mask = UInt32(value, radix: 8) else { fail("bad --umask") }
            umask(mode_t(mask))
        default: fail("unknown flag \(flag)")
        }
    }
    guard let storeKind = kindArgument, let path = pathArgument else { fail("--store and --path are required") }
    if keys.isEmpty { keys = ["value"] }

    let insert: @Sendable (CrashRecord, String) async throws -> Void
    var retrieve: (@Sendable (String) async throws -> CrashRecord?)?
    let writesFillers: Bool
    switch storeKind {
    case "file":
        let store = FileStore<CrashRecord>(directory: URL(fileURLWithPath: path))
        insert = { record, key in try await store.insert(record, for: key, storedAt: Date()) }
        retrieve = { key in try await store.retrieve(key)?.value }
        writesFillers = false
    case "file-limited":
        let store = FileStore<CrashRecord>(directory: URL(fileURLWithPath: path), countLimit: countLimit, byteLimit: byteLimit)
        insert = { record, key in try await store.insert(record, for: key, storedAt: Date()) }
        retrieve = { key in try await store.retrieve(key)?.value }
        writesFillers = true
    case "sqlite":
        let store = try SQLiteStore<CrashRecord>(path: path, limits: .init(countLimit: countLimit, byteLimit: byteLimit))
        insert = { record, key in try await store.insert(record, for: key, storedAt: Date()) }
        retrieve = { key in try await store.retrieve(key)?.value }
        writesFillers = true
    case "defaults":
        let store = UserDefaultsStore<CrashRecord>(suiteName: path)
        insert = { record, key in try await store.insert(record, for: key, storedAt: Date()) }
        writesFillers = false
    case "naive":
        insert = { record, _ in try writeInPlace(record, at: path) }
        writesFillers = false
    case "outbox-enqueue", "outbox-enqueue-sqlite":
        let storage: any OutboxStorage = storeKind == "outbox-enqueue"
            ? FileOutboxStorage(directory: URL(fileURLWithPath: path)) : try SQLiteOutboxStorage(path: path)
        let outbox = Outbox(storage: storage, name: "crash")
        outbox.connectivityChanged(isOnline: false)
        let posts = (url ?? URL(string: "http://127.0.0.1:9")!).appendingPathComponent("posts")
        insert = { record, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for post in 3 * record.seq..<3 * record.seq + 3 {
                    group.addTask {
                        var request = HTTPRequest(method: .post, url: posts)
                        request.headerFields[.contentType] = "application/json"
                        try await outbox.enqueue(
                            request, body: try JSONEncoder().encode(CrashPost(seq: post)), scope: crashScope(ofPost: post))
                    }
                }
                try await group.waitForAll()
            }
        }
        writesFillers = false
    case "outbox-replay":
        let outbox = Outbox(storage: FileOutboxStorage(directory: URL(fileURLWithPath: path)), name: "crash")
        outbox.registerHTTP(transport: AnnouncingTransport(base: .shared))
        let report = try await outbox.drain()
        emit("done \(report.delivered)\n")
        if report.parked > 0 || report.deferred > 0 { fail("drain: \(report)") }
        return
    default:
        fail("unknown store \(storeKind)")
    }

    // MARK: The loop

    if watched != nil && retrieve == nil { fail("--watch needs a store") }
    var newestSeen = Int.min
    var seq = start
    while count.map({ seq < start + $0 }) ?? true {
        let record = CrashRecord(seq: seq)
        emit("w \(seq) \(monotonicNanoseconds())\n")
        do {
            for key in keys {
                try await insert(record, key)
            }
            if writesFillers {
                try await insert(CrashRecord(seq: -seq), "filler-\(seq % 8)")
            }
        } catch {
            fail("round \(seq) failed: \(error)")
        }
        emit("a \(seq) \(monotonicNanoseconds())\n")
        if let watched, let retrieve {
            let seen: CrashRecord?
            do {
                seen = try await retrieve(watched)
            } catch {
                fail("round \(seq): reading \(watched) failed: \(error)")
            }
            if let seen {
                guard seen.digest == CrashRecord.digest(of: seen.payload), seen.payload == CrashRecord.payload(for: seen.seq) else {
                    fail("round \(seq): \(watched) holds a torn value (round \(seen.seq))")
                }
                guard seen.seq >= newestSeen else {
                    fail("round \(seq): \(watched) went back from round \(newestSeen) to round \(seen.seq)")
                }
                newestSeen = seen.seq
                emit("r \(seen.seq)\n")
            } else {
                emit("r -\n")
            }
        }
        seq += 1
    }
    if storeKind == "defaults" {
        // Foundation persists defaults lazily; a run that ends normally saves what it wrote.
        _ = UserDefaults(suiteName: path)?.synchronize()
    }
}

do {
    try await run()
} catch {
    fail("\(error)")
}
