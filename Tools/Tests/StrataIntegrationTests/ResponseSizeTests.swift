import ArgumentParser
import Foundation
import Testing
@_spi(StrataInternals) import Strata
@testable import StrataCLI
import DemoServer
import StrataTesting

/// `strata fetch --max-body`: sizes parse, a larger body fails the remote tier (and is never cached),
/// the next tier serves.
@Suite("response size limit in strata fetch", .timeLimit(.minutes(3)))
struct ResponseSizeTests {
    @Test(arguments: [
        ("8MB", 8 * 1_048_576), ("512KB", 512 * 1024), ("1GB", 1_073_741_824), ("1048576", 1_048_576),
        ("100B", 100), ("2MiB", 2 * 1_048_576), ("1.5k", 1536), ("64 kb", 65_536), ("3m", 3 * 1_048_576),
    ])
    func sizes_parse(text: String, bytes: Int) {
        #expect(ByteCountArgument(argument: text)?.bytes == bytes)
    }

    @Test func none_meansNoLimit() throws {
        let parsed = try #require(ByteCountArgument(argument: "none"))
        #expect(parsed.bytes == nil)
    }

    @Test(arguments: ["", "MB", "-1MB", "0", "8XB", "lots", "nan", "1e400"])
    func badSizes_areRejected(text: String) {
        #expect(ByteCountArgument(argument: text) == nil)
    }

    @Test func badMaxBody_isAUsageError() {
        do {
            _ = try StrataCommand.parseAsRoot(["fetch", "http://example.com", "--max-body", "huge"])
            Issue.record("expected --max-body huge to be rejected")
        } catch {
            #expect(StrataCommand.exitCode(for: error).rawValue == 64)
        }
    }

    @Test func maxBody_defaultsTo8MB_andHelpMentionsIt() throws {
        let command = try #require(try StrataCommand.parseAsRoot(["fetch", "http://example.com"]) as? FetchCommand)
        #expect(command.maxBody.bytes == 8 * 1_048_576)
        #expect(Fetcher.defaultMaxBodyBytes == 8 * 1_048_576)
        #expect(StrataCommand.helpMessage(for: FetchCommand.self).contains("--max-body"))
    }

    @Test(arguments: [(1 << 30, "1 GB"), (8 << 20, "8 MB"), (1536, "1.5 KB"), (512, "512 bytes")])
    func byteCounts_areFormattedForPeople(bytes: Int, text: String) {
        #expect(formatByteCount(bytes) == text)
    }

    @Test func largerBody_failsTheRemoteTier_isNotCached_andTheStaleCopyServes() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-maxbody")
        try await withDemoServer { server in
            var options = Fetcher.Options(url: server.feedURL, cacheDirectory: directory.url, maxAge: .zero, retries: 1)
            options.maxBodyBytes = 64 * 1024
            let first = CapturedOutput()
            #expect(await Fetcher(options: options).run(stdout: first.stdout, stderr: first.stderr) == .served)
            let cached = try await FileStore<Data>(directory: directory.url, codec: DataCodec()).retrieve(server.feedURL.absoluteString)

            server.faults = .init(oversizedBody: 4 << 20, declaresOversizedLength: false)
            let output = CapturedOutput()
            options.verbose = true
            let code = await Fetcher(options: options).run(stdout: output.stdout, stderr: output.stderr)

            #expect(code == .served)
            #expect(output.body == first.body)
            #expect(output.report.last?.hasPrefix("strata fetch: served from stale cache") == true)
            #expect(output.report.contains { $0.contains("is larger than the limit of 65536 bytes") }, "\(output.report)")
            #expect(server.requestCount() == 2, "a body over the limit is not retried")
            let after = try await FileStore<Data>(directory: directory.url, codec: DataCodec()).retrieve(server.feedURL.absoluteString)
            #expect(after?.value == cached?.value && after?.storedAt == cached?.storedAt)
        }
    }

    @Test func theBinary_refusesABodyOverMaxBody_andServesOneUnderIt() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-maxbody-binary")
        try await withDemoServer { server in
            server.faults = .init(oversizedBody: 3 << 20, declaresOversizedLength: false)
            let url = server.feedURL.absoluteString

            let refused = try await TwoProcessTests.run(["fetch", url, "--cache-dir", directory.url.path, "--retries", "0", "--max-body", "1MB"])
            #expect(refused.status == 1)
            #expect(refused.stdout.isEmpty)
            #expect(refused.stderr.contains("remote: response larger than 1 MB (--max-body)"), "\(refused.stderr)")

            let served = try await TwoProcessTests.run(["fetch", url, "--cache-dir", directory.url.path, "--retries", "0", "--max-body", "4MB"])
            #expect(served.status == 0, "\(served.stderr)")
            #expect(served.stdout.count == 3 << 20)
        }
    }

    @Test func theBinary_defaultLimitIs8MB() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-maxbody-default")
        try await withDemoServer { server in
            server.faults = .init(oversizedBody: 9 << 20, declaresOversizedLength: true)
            let run = try await TwoProcessTests.run(["fetch", server.feedURL.absoluteString, "--cache-dir", directory.url.path, "--retries", "0"])
            #expect(run.status == 1)
            #expect(run.stderr.contains("remote: response larger than 8 MB (--max-body)"), "\(run.stderr)")
        }
    }
}
