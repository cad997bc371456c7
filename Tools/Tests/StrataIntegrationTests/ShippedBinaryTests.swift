import Foundation
import StrataTesting
import Testing

/// The shipped `strata` command (and the demo inside it) must not link the test kit: StrataTesting
/// is for tests only. Checked twice: in the package's target graph (a dependency declared but not yet
/// used counts too) and in the built binary's symbols (any other way the kit could get in).
@Suite("strata links no test kit", .timeLimit(.minutes(3)))
struct ShippedBinaryTests {
    /// The Tools package's directory: this file is `Tools/Tests/StrataIntegrationTests/…`.
    static let toolsPackage = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func noTargetTheExecutableReachesDependsOnStrataTesting() throws {
        let scratch = try TemporaryDirectory(prefix: "strata-dump-package")
        let json = try Self.run(
            "/usr/bin/env",
            ["swift", "package", "--package-path", Self.toolsPackage.path, "--scratch-path", scratch.url.path, "dump-package"])
        let graph = try TargetGraph(manifestJSON: json)

        let reachable = graph.targetsReachable(from: "strata")
        #expect(reachable.isSuperset(of: ["strata", "StrataCLI", "StrataDemo", "DemoServer"]), "the graph was read: \(reachable.sorted())")
        let offenders = reachable.filter { graph.products(of: $0).contains("StrataTesting") }
        #expect(offenders.isEmpty, "targets linked into strata that depend on StrataTesting: \(offenders.sorted())")
    }

    @Test func theBuiltBinaryHasNoStrataTestingSymbols() throws {
        let binary = try TwoProcessTests.executable()
        let symbols = String(decoding: try Self.run("/usr/bin/env", ["nm", binary.path]), as: UTF8.self)
        // Swift mangles a module name as its length and the name: `$s12StrataTesting11ManualClockC…`.
        #expect(symbols.contains("6Strata"), "nm listed the binary's Swift symbols")
        let fromTestKit = symbols.split(separator: "\n").filter { $0.contains("12StrataTesting") }
        #expect(fromTestKit.isEmpty, "strata contains \(fromTestKit.count) symbols of StrataTesting, e.g. \(fromTestKit.prefix(3))")
    }

    /// Runs a command to completion and returns its standard output; throws if it fails.
    static func run(_ executable: String, _ arguments: [String]) throws -> Data {
        let directory = try TemporaryDirectory(prefix: "strata-no-test-kit")
        let errorFile = directory.appending("stderr")
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: errorFile)
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()  // before waiting: a full pipe blocks the child
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let errors = (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
            throw TestError("\(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(errors)")
        }
        return data
    }
}

/// The targets of a package manifest (`swift package dump-package`) and what each depends on.
struct TargetGraph {
    /// For each target: the targets of this package it depends on, and the products of other packages.
    private var targets: [String: (targets: [String], products: [String])] = [:]

    init(manifestJSON: Data) throws {
        guard let manifest = try JSONSerialization.jsonObject(with: manifestJSON) as? [String: Any],
              let list = manifest["targets"] as? [[String: Any]] else {
            throw TestError("dump-package printed no targets")
        }
        for target in list {
            guard let name = target["name"] as? String else { continue }
            var entry: (targets: [String], products: [String]) = ([], [])
            for dependency in target["dependencies"] as? [[String: Any]] ?? [] {
                // Each is `{"byName": [name, condition]}`, `{"target": [name, condition]}` or
                // `{"product": [name, package, moduleAliases, condition]}`.
                if let product = (dependency["product"] as? [Any])?.first as? String {
                    entry.products.append(product)
                } else if let local = ((dependency["byName"] ?? dependency["target"]) as? [Any])?.first as? String {
                    entry.targets.append(local)
                }
            }
            targets[name] = entry
        }
    }

    /// `root` and every target of this package it depends on, directly or not.
    func targetsReachable(from root: String) -> Set<String> {
        var seen: Set<String> = []
        var next = [root]
        while let name = next.popLast() {
            guard targets[name] != nil, seen.insert(name).inserted else { continue }
            next += targets[name]?.targets ?? []
        }
        return seen
    }

    /// The products of other packages `target` depends on.
    func products(of target: String) -> [String] { targets[target]?.products ?? [] }
}
