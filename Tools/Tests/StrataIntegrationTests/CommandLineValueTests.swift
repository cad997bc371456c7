import ArgumentParser
import Foundation
import Testing
@testable import StrataCLI

/// Every number, duration and size the `strata` command takes is refused with exit status 64 and a
/// message naming the option when it is out of range: overflow, NaN, infinity, negative, zero where
/// zero makes no sense. None of them traps.
@Suite("strata command-line values", .timeLimit(.minutes(3)))
struct CommandLineValueTests {
    static let url = "http://127.0.0.1:9/feed"

    /// Negative values are written `--option=-1`, so the parser takes them as values, not flags.
    static let badValues: [(arguments: [String], option: String)] = [
        // fetch durations
        (["fetch", url, "--max-age", "1e17"], "--max-age"),
        (["fetch", url, "--max-age", "1e17s"], "--max-age"),
        (["fetch", url, "--max-age", "9223372036854775807"], "--max-age"),
        (["fetch", url, "--max-age", "36526d"], "--max-age"),
        (["fetch", url, "--max-age", "1e400"], "--max-age"),
        (["fetch", url, "--max-age", "nan"], "--max-age"),
        (["fetch", url, "--max-age", "inf"], "--max-age"),
        (["fetch", url, "--max-age=-inf"], "--max-age"),
        (["fetch", url, "--max-age=-1s"], "--max-age"),
        (["fetch", url, "--max-age", ""], "--max-age"),
        (["fetch", url, "--max-stale", "1e17"], "--max-stale"),
        (["fetch", url, "--max-stale", "nan"], "--max-stale"),
        (["fetch", url, "--max-stale=-5m"], "--max-stale"),
        (["fetch", url, "--timeout", "1e17"], "--timeout"),
        (["fetch", url, "--timeout", "nan"], "--timeout"),
        (["fetch", url, "--timeout=-1"], "--timeout"),
        (["fetch", url, "--timeout", "0"], "--timeout"),
        (["fetch", url, "--timeout", "0.0001ms"], "--timeout"),
        // fetch sizes
        (["fetch", url, "--max-body", "1e400"], "--max-body"),
        (["fetch", url, "--max-body", "1e19"], "--max-body"),
        (["fetch", url, "--max-body", "99999999999GB"], "--max-body"),
        (["fetch", url, "--max-body", "nan"], "--max-body"),
        (["fetch", url, "--max-body", "inf"], "--max-body"),
        (["fetch", url, "--max-body=-1"], "--max-body"),
        (["fetch", url, "--max-body", "0"], "--max-body"),
        (["fetch", url, "--max-body", "0.4"], "--max-body"),
        // fetch counts and times
        (["fetch", url, "--retries=-1"], "--retries"),
        (["fetch", url, "--retries", "11"], "--retries"),
        (["fetch", url, "--retries", "99999999999999999999"], "--retries"),
        (["fetch", url, "--retries", "1e3"], "--retries"),
        (["fetch", url, "--retries", "nan"], "--retries"),
        (["fetch", url, "--now", "yesterday"], "--now"),
        (["fetch", url, "--now", "1e17"], "--now"),
        // serve
        (["serve", "--latency", "1e17"], "--latency"),
        (["serve", "--latency", "nan"], "--latency"),
        (["serve", "--latency=-1ms"], "--latency"),
        (["serve", "--port", "70000"], "--port"),
        (["serve", "--port=-1"], "--port"),
        (["serve", "--port", "1e17"], "--port"),
        (["serve", "--port", "99999999999999999999"], "--port"),
        (["serve", "--error-rate", "nan"], "--error-rate"),
        (["serve", "--error-rate", "inf"], "--error-rate"),
        (["serve", "--error-rate=-0.1"], "--error-rate"),
        (["serve", "--retry-after=-1"], "--retry-after"),
        (["serve", "--retry-after", "99999999999"], "--retry-after"),
        (["serve", "--retry-after", "1e17"], "--retry-after"),
        (["serve", "--status", "99999999999999999999"], "--status"),
        (["serve", "--status", "nan"], "--status"),
    ]

    @Test(arguments: badValues)
    func outOfRangeValues_areUsageErrorsNamingTheOption(arguments: [String], option: String) {
        do {
            _ = try StrataCommand.parseAsRoot(arguments)
            Issue.record("expected \(arguments) to be rejected")
        } catch {
            #expect(StrataCommand.exitCode(for: error).rawValue == 64)
            let message = StrataCommand.message(for: error)
            #expect(message.contains(option), "\(message)")
            #expect(!message.hasPrefix("Missing value"), "the value itself was judged: \(message)")
        }
    }

    @Test(arguments: [
        ("1e17", "longer than 100 years"), ("nan", "NaN is not a number"), ("inf", "must be finite"),
        ("-1s", "must not be negative"), ("soon", "not a number"),
    ])
    func theMessageSaysWhy(value: String, reason: String) {
        do {
            _ = try StrataCommand.parseAsRoot(["fetch", Self.url, "--max-age=\(value)"])
            Issue.record("expected --max-age \(value) to be rejected")
        } catch {
            let message = StrataCommand.message(for: error)
            #expect(message.contains("The value '\(value)' is invalid for '--max-age <max-age>'"), "\(message)")
            #expect(message.contains(reason), "\(message)")
        }
    }

    @Test func theLimitsThemselvesAreAccepted() throws {
        let longest = try #require(try StrataCommand.parseAsRoot(
            ["fetch", Self.url, "--max-age", "36525d", "--max-stale", "0", "--timeout", "1ms", "--max-body", "1B"]) as? FetchCommand)
        #expect(longest.maxAge.duration == DurationArgument.maximum)
        #expect(longest.maxStale?.duration == .zero)
        #expect(longest.timeout.duration == .milliseconds(1))
        #expect(longest.maxBody.bytes == 1)
        let biggest = try #require(try StrataCommand.parseAsRoot(["fetch", Self.url, "--max-body", "9223372036854774784"]) as? FetchCommand)
        #expect(biggest.maxBody.bytes == 9_223_372_036_854_774_784, "the largest Double below 2^63")
    }

    @Test func now_takesAnISO8601DateAndTime() throws {
        let command = try #require(try StrataCommand.parseAsRoot(["fetch", Self.url, "--now", "2026-01-02T03:04:05Z"]) as? FetchCommand)
        #expect(command.now == Date(timeIntervalSince1970: 1_767_323_045))
        let fractional = try #require(try StrataCommand.parseAsRoot(["fetch", Self.url, "--now", "2026-01-02T03:04:05.5Z"]) as? FetchCommand)
        #expect(fractional.now == Date(timeIntervalSince1970: 1_767_323_045.5))
        #expect(!StrataCommand.helpMessage(for: FetchCommand.self).contains("--now"), "a test hook, hidden from help")
    }

    /// The built binary: these exit 64 with a message, never trap (SIGILL/SIGTRAP, status 132/133) in
    /// the argument parser.
    @Test(arguments: [
        (["fetch", url, "--max-age", "1e17"], "--max-age"), (["fetch", url, "--max-stale", "1e17"], "--max-stale"),
        (["fetch", url, "--timeout", "1e17"], "--timeout"), (["serve", "--latency", "1e17"], "--latency"),
    ])
    func theBinary_exits64WithAMessage_insteadOfTrapping(arguments: [String], option: String) async throws {
        let result = try await TwoProcessTests.run(arguments)

        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("Error: The value '1e17' is invalid for '\(option)"), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }
}
