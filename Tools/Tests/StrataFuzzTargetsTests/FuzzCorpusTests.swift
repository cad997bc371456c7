import Foundation
import StrataFuzzTargets
import Testing

/// Every committed fuzz corpus, replayed by the built `strata-fuzz` (in a process of its own, so a
/// target's servers end with it): each input that ever broke a property is in its target's corpus,
/// so this is the fuzzers' regression test. `scripts/fuzz.sh` runs the fuzzers themselves.
@Suite("fuzz corpora", .timeLimit(.minutes(5)))
struct FuzzCorpusTests {
    static let corpusRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/Corpus")

    static func executable() throws -> URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL,
            Bundle.main.bundleURL.deletingLastPathComponent(),
        ].map { $0.appendingPathComponent("strata-fuzz") }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw CorpusError(description: "no built strata-fuzz next to the tests (looked in \(candidates.map(\.path)))")
        }
        return found
    }

    struct CorpusError: Error, CustomStringConvertible {
        let description: String
    }

    @Test("every target has a committed corpus, and every corpus a target")
    func corporaMatchTargets() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.corpusRoot.path).filter { !$0.hasPrefix(".") }
        #expect(Set(folders) == Set(FuzzTargets.all.map(\.name)))
        #expect(FuzzTargets.all.count >= 16)
    }

    @Test("each corpus replays without breaking a property", arguments: FuzzTargets.all.map(\.name))
    func corpusReplays(target: String) throws {
        let corpus = Self.corpusRoot.appendingPathComponent(target)
        let inputs = try FileManager.default.contentsOfDirectory(atPath: corpus.path)
        #expect(inputs.count >= 3, "the corpus of \(target) has \(inputs.count) inputs")
        let process = Process()
        process.executableURL = try Self.executable()
        process.arguments = [target, corpus.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "strata-fuzz \(target) \(corpus.path):\n\(printed)")
        #expect(printed.contains("replayed \(inputs.count) inputs, 0 broke a property"), "\(printed)")
    }
}
