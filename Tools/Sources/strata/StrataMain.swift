import ArgumentParser
import StrataCLI

/// The `strata` executable: everything lives in `StrataCLI`, so tests can run the commands in-process.
@main
enum StrataMain {
    static func main() async {
        await StrataCommand.main()
    }
}
