import Foundation
import StrataFuzzShim
import StrataFuzzTargets

/// `strata-fuzz TARGET [libFuzzer options] [CORPUS…]`: runs one fuzz target under libFuzzer (built by
/// `scripts/fuzz.sh`, which links it); `strata-fuzz TARGET FILE|FOLDER…` in a build without libFuzzer
/// replays inputs instead; `strata-fuzz --list` names every target; `strata-fuzz TARGET --write-seeds
/// FOLDER` writes the inputs its corpus started from.
@main
enum StrataFuzz {
    static func main() async {
        var arguments = CommandLine.arguments
        guard arguments.count >= 2, arguments[1] != "--help", arguments[1] != "-h" else {
            print("usage: strata-fuzz TARGET [libFuzzer options] [CORPUS…] | strata-fuzz --list")
            exit(arguments.count >= 2 ? 0 : 2)
        }
        if arguments[1] == "--driver" {
            print(strata_fuzz_has_driver() != 0 ? "libFuzzer" : "replay")
            return
        }
        if arguments[1] == "--list" {
            for target in FuzzTargets.all { print("\(target.name)\t\(target.summary)") }
            return
        }
        // libFuzzer's merge and fork modes run this program again with the driver's command line,
        // which has no target name: the target then comes from the environment, set below.
        if FuzzTargets.named(arguments[1]) == nil, let inherited = ProcessInfo.processInfo.environment["STRATA_FUZZ_TARGET"] {
            arguments.insert(inherited, at: 1)
        }
        guard let target = FuzzTargets.named(arguments[1]) else {
            FileHandle.standardError.write(Data("strata-fuzz: no target named \(arguments[1]); --list names them\n".utf8))
            exit(2)
        }
        setenv("STRATA_FUZZ_TARGET", target.name, 1)
        if arguments.count == 4, arguments[2] == "--write-seeds" {
            let folder = URL(fileURLWithPath: arguments[3])
            try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for seed in target.seeds() {
                _ = FileManager.default.createFile(atPath: folder.appendingPathComponent(seed.name).path, contents: Data(seed.bytes))
            }
            print("strata-fuzz \(target.name): wrote \(target.seeds().count) seeds to \(folder.path)")
            return
        }
        let started: FuzzRunner
        do {
            started = try await target.makeRunner()
        } catch {
            FileHandle.standardError.write(Data("strata-fuzz: \(target.name) did not start: \(error)\n".utf8))
            exit(1)
        }
        runner = started
        let status: Int32
        if strata_fuzz_has_driver() != 0 {
            status = fuzz(arguments: [arguments[0]] + arguments.dropFirst(2))
        } else {
            status = replay(target: target.name, paths: arguments.dropFirst(2).filter { !$0.hasPrefix("-") })
        }
        await started.stop()
        exit(status)
    }

    /// The target libFuzzer calls: set once, before the driver starts, and read only on the driver's
    /// thread, so it needs no lock (the callback is a C function pointer and cannot capture it).
    nonisolated(unsafe) static var runner: FuzzRunner?

    static func fuzz(arguments: [String]) -> Int32 {
        var argc = Int32(arguments.count)
        let strings = arguments.map { strdup($0) }
        let vector = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() { vector[index] = string }
        vector[strings.count] = nil
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = vector
        return strata_fuzz_run_driver(&argc, &argv) { data, size in
            let bytes = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
            do {
                try StrataFuzz.runner!.run(bytes)
            } catch {
                // A broken property is a crash to libFuzzer: it keeps the input and stops.
                FileHandle.standardError.write(Data("strata-fuzz: property violated: \(String(describing: error))\n".utf8))
                abort()
            }
            return 0
        }
    }

    /// Runs every file named, and every file in every folder named; prints what broke.
    static func replay(target: String, paths: [String]) -> Int32 {
        var files: [String] = []
        for path in paths {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                FileHandle.standardError.write(Data("strata-fuzz: no such file or folder: \(path)\n".utf8))
                return 2
            }
            if isFolder.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                files += names.sorted().map { (path as NSString).appendingPathComponent($0) }
            } else {
                files.append(path)
            }
        }
        var failures = 0
        for file in files {
            guard let bytes = FileManager.default.contents(atPath: file) else { continue }
            do {
                try runner!.run(Array(bytes))
            } catch {
                failures += 1
                print("FAIL \(file): \(String(describing: error))")
            }
        }
        print("strata-fuzz \(target): replayed \(files.count) inputs, \(failures) broke a property")
        return failures == 0 ? 0 : 1
    }
}
