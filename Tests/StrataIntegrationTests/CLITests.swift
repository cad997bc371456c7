import ArgumentParser
import Foundation
import Testing
@_spi(StrataInternals) import Strata
@testable import StrataCLI
import StrataDemo
import StrataTesting

/// What one `strata fetch` run printed.
final class CapturedOutput: Sendable {
    private let out = Locked(Data())
    private let err = Locked([String]())
    var body: Data { out.withLock { $0 } }
    var report: [String] { err.withLock { $0 } }
    var stdout: @Sendable (Data) -> Void { { data in self.out.withLock { $0.append(data) } } }
    var stderr: @Sendable (String) -> Void { { line in self.err.withLock { $0.append(line) } } }
}

@Suite("strata fetch")
final class FetchTests {
    let directory: TemporaryDirectory
    let clock = ManualClock()

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-fetch")
    }

    func fetch(_ url: URL, maxAge: Duration = .seconds(300), maxStale: Duration? = nil, retries: Int = 0,
               defaultFile: URL? = nil, json: Bool = false) async -> (Fetcher.ExitCode, CapturedOutput) {
        let output = CapturedOutput()
        let options = Fetcher.Options(
            url: url, cacheDirectory: directory.url, maxAge: maxAge, maxStale: maxStale, retries: retries,
            timeout: .seconds(10), defaultFile: defaultFile, json: json)
        let code = await Fetcher(options: options, now: clock.wallClock).run(stdout: output.stdout, stderr: output.stderr)
        return (code, output)
    }

    @Test func online_servesTheRemoteBodyAndSavesIt() async throws {
        try await withDemoServer { server in
            let (code, output) = await fetch(server.feedURL)

            let feed = try JSONDecoder().decode([FeedItem].self, from: output.body)
            #expect(code == .served)
            #expect(feed == DemoData.feed)
            #expect(output.report == ["strata fetch: served from remote (age 0s, saved to the cache), \(output.body.count) bytes"])
        }
    }

    @Test func withinMaxAge_servesTheFreshCacheWithoutARequest() async throws {
        try await withDemoServer { server in
            _ = await fetch(server.feedURL)
            clock.advance(by: .seconds(60))

            let (code, output) = await fetch(server.feedURL, maxAge: .seconds(120))

            #expect(code == .served)
            #expect(output.report.last?.hasPrefix("strata fetch: served from fresh cache (age 1m 0s)") == true)
            #expect(server.requestCount() == 1)
        }
    }

    @Test func serverStopped_servesTheStaleCopy() async throws {
        try await withDemoServer { server in
            let (_, first) = await fetch(server.feedURL)
            await server.goOffline()
            clock.advance(by: .seconds(3600))

            let (code, output) = await fetch(server.feedURL, maxAge: .seconds(60))

            #expect(code == .served)
            #expect(output.body == first.body)
            #expect(output.report.last?.hasPrefix("strata fetch: served from stale cache (age 1h 0m)") == true)
        }
    }

    @Test func copyOlderThanMaxStale_isNotServed() async throws {
        try await withDemoServer { server in
            _ = await fetch(server.feedURL)
            await server.goOffline()
            clock.advance(by: .seconds(2 * 86_400))

            let (code, output) = await fetch(server.feedURL, maxAge: .seconds(60), maxStale: .seconds(86_400))

            #expect(code == .nothingServed)
            #expect(output.body.isEmpty)
            #expect(output.report.count == 1)
            #expect(output.report[0].contains("stale cache: cached copy too old (2d 0h)"))
        }
    }

    @Test func nothingAnywhere_exitsNonZeroWithOneLineSayingWhyPerTier() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            let (code, output) = await fetch(server.feedURL)

            #expect(code == .nothingServed)
            #expect(code.rawValue == 1)
            #expect(output.report == [
                "strata fetch: nothing to serve for \(server.feedURL.absoluteString): fresh cache: nothing cached; "
                    + "remote: could not connect (connection refused); stale cache: nothing cached; default: no --default file given",
            ])
        }
    }

    @Test func defaultFile_isServedWhenThereIsNeitherNetworkNorCache() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            let file = directory.appending("default.json")
            try Data("[]".utf8).write(to: file)

            let (code, output) = await fetch(server.feedURL, defaultFile: file)

            #expect(code == .served)
            #expect(output.body == Data("[]".utf8))
            #expect(output.report.last?.hasPrefix("strata fetch: served from default") == true)
        }
    }

    @Test func serverError_isNotCachedAndFallsBackToTheCopy() async throws {
        try await withDemoServer { server in
            let (_, first) = await fetch(server.feedURL)
            server.faults = .init(status: 500)
            clock.advance(by: .seconds(600))

            let (code, output) = await fetch(server.feedURL, maxAge: .seconds(60))

            #expect(code == .served)
            #expect(output.body == first.body)
            let cached = try await FileStore<Data>(directory: directory.url, codec: DataCodec()).retrieve(server.feedURL.absoluteString)
            #expect(cached?.value == first.body, "the 500 body never replaces the good copy")
        }
    }

    @Test func json_reportsProvenanceAsOneObject() async throws {
        try await withDemoServer { server in
            _ = await fetch(server.feedURL)
            clock.advance(by: .seconds(30))

            let (_, output) = await fetch(server.feedURL, json: true)

            let object = try #require(try JSONSerialization.jsonObject(with: Data(output.report[0].utf8)) as? [String: Any])
            #expect(object["servedFrom"] as? String == "fresh cache")
            #expect(object["origin"] as? String == "disk")
            #expect(object["ageSeconds"] as? Double == 30)
            #expect(object["url"] as? String == server.feedURL.absoluteString)
        }
    }
}

@Suite("strata command line")
struct CommandLineTests {
    @Test(arguments: [
        ("500ms", Duration.milliseconds(500)), ("30s", .seconds(30)), ("10m", .seconds(600)), ("2h", .seconds(7200)),
        ("7d", .seconds(604_800)), ("90", .seconds(90)), ("1.5s", .milliseconds(1500)),
    ])
    func durations_parse(text: String, expected: Duration) {
        #expect(DurationArgument(argument: text)?.duration == expected)
    }

    @Test(arguments: ["", "abc", "-5s", "10x", "s", "infs"])
    func badDurations_areRejected(text: String) {
        #expect(DurationArgument(argument: text) == nil)
    }

    @Test(arguments: [
        ["fetch", "notaurl"], ["fetch", "ftp://example.com/x"], ["fetch", "http://"],
        ["fetch", "http://example.com", "--retries", "99"], ["fetch", "http://example.com", "--max-age", "soon"],
        ["fetch", "http://example.com", "--default", "/no/such/file"], ["serve", "--status", "42"],
        ["serve", "--error-rate", "2"], ["demo", "--scenario", "nope"],
    ])
    func badFlagsAndURLs_areUsageErrorsWithAMessage(arguments: [String]) {
        do {
            _ = try StrataCommand.parseAsRoot(arguments)
            Issue.record("expected \(arguments) to be rejected")
        } catch {
            #expect(StrataCommand.exitCode(for: error).rawValue == 64)
            #expect(!StrataCommand.message(for: error).isEmpty)
        }
    }

    @Test(arguments: ["", "demo", "serve", "fetch"])
    func everySubcommandHasHelp(subcommand: String) {
        let types: [String: any ParsableCommand.Type] = [
            "": StrataCommand.self, "demo": DemoCommand.self, "serve": ServeCommand.self, "fetch": FetchCommand.self,
        ]
        let help = StrataCommand.helpMessage(for: types[subcommand]!)
        #expect(help.contains("USAGE: strata" + (subcommand.isEmpty ? "" : " \(subcommand)")))
        #expect(help.contains("OVERVIEW:"))
    }
}

@Suite("strata serve controls")
struct ServeControlTests {
    @Test func commandsChangeTheRunningServer() async throws {
        try await withDemoServer { server in
            let control = ServeControl(server: server)

            #expect(await control.apply("status 503 0.5") == "faults: status 503 on 50% of requests")
            #expect(server.faults.status == 503 && server.faults.errorRate == 0.5)
            #expect(await control.apply("latency 250ms") == "faults: status 503 on 50% of requests, +250ms latency")
            #expect(await control.apply("truncate on").hasSuffix("truncated bodies"))
            #expect(await control.apply("healthy") == "faults: none")
            #expect(server.faults == .none)

            _ = await control.apply("offline")
            #expect(!server.isOnline)
            await #expect(throws: HTTPError.self) { try await HTTPLoader(url: server.feedURL).load() }
            #expect(await control.apply("online").hasPrefix("online: listening on"))
            let status = try await HTTPLoader(url: server.feedURL).load().statusCode
            #expect(status == 200)

            #expect(await control.apply("status 42").hasPrefix("usage:"))
            #expect(await control.apply("dance").hasPrefix("unknown command"))
            #expect(await control.apply("quit") == ServeControl.quitReply)
        }
    }
}

/// The built `strata` binary, run as separate processes: `serve` in one, `fetch` in another.
@Suite("strata, two processes")
struct TwoProcessTests {
    /// The `strata` executable built next to this test binary.
    static func executable() throws -> URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL,
            Bundle.main.bundleURL.deletingLastPathComponent(),
        ].map { $0.appendingPathComponent("strata") }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw TestError("no built strata executable next to the tests (looked in \(candidates.map(\.path)))")
        }
        return found
    }

    static func run(_ arguments: [String], stdin: Pipe? = nil) throws -> (process: Process, stdout: Pipe, stderr: Pipe) {
        let process = Process()
        process.executableURL = try executable()
        process.arguments = arguments
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = stdin ?? FileHandle.nullDevice
        try process.run()
        return (process, stdout, stderr)
    }

    /// Runs `strata` to completion. Output goes to files, not pipes, so reading it never depends on
    /// every copy of a pipe's write end being closed.
    static func finish(_ arguments: [String]) throws -> (status: Int32, stdout: Data, stderr: String) {
        let directory = try TemporaryDirectory(prefix: "strata-2p-out")
        let outURL = directory.appending("stdout")
        let errURL = directory.appending("stderr")
        FileManager.default.createFile(atPath: outURL.path, contents: nil)
        FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let process = Process()
        process.executableURL = try executable()
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, try Data(contentsOf: outURL), String(decoding: try Data(contentsOf: errURL), as: UTF8.self))
    }

    @Test func fetchServesFromTheServerThenFromTheCacheOnceTheServerIsStopped() async throws {
        let cache = try TemporaryDirectory(prefix: "strata-2p")
        let input = Pipe()
        let serve = try Self.run(["serve", "--port", "0"], stdin: input)
        defer { if serve.process.isRunning { serve.process.terminate() } }
        // A failsafe, not a wait: if the server never answers, end it so the test fails instead of hanging.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(120))
            if serve.process.isRunning { serve.process.terminate() }
        }
        defer { watchdog.cancel() }

        // The first line names the URL the server listens on.
        var banner = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        let fd = serve.stdout.fileHandleForReading.fileDescriptor
        while !banner.contains(UInt8(ascii: "\n")) {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            banner.append(contentsOf: buffer[0..<count])
        }
        let firstLine = String(decoding: banner, as: UTF8.self).split(separator: "\n").first ?? ""
        let base = try #require(firstLine.split(separator: " ").last.map(String.init))
        #expect(firstLine.hasPrefix("strata serve: listening on http://127.0.0.1:"))

        let online = try Self.finish(["fetch", base + "/feed", "--cache-dir", cache.url.path, "--max-age", "0s"])
        #expect(online.status == 0)
        #expect(try JSONDecoder().decode([FeedItem].self, from: online.stdout) == DemoData.feed)
        #expect(online.stderr.contains("served from remote"))

        input.fileHandleForWriting.write(Data("quit\n".utf8))
        serve.process.waitUntilExit()
        #expect(serve.process.terminationStatus == 0)

        let offline = try Self.finish(["fetch", base + "/feed", "--cache-dir", cache.url.path, "--max-age", "0s", "--retries", "0"])
        #expect(offline.status == 0)
        #expect(offline.stdout == online.stdout)
        #expect(offline.stderr.contains("served from stale cache"))

        let nothing = try Self.finish(["fetch", base + "/other", "--cache-dir", cache.url.path, "--retries", "0"])
        #expect(nothing.status == 1)
        #expect(nothing.stderr.split(separator: "\n").count == 1)
        #expect(nothing.stdout.isEmpty)
    }
}
