import Benchmark
import BenchmarkFixtures
import Foundation

let benchmarks: @Sendable () -> Void = {
    let feed = BenchmarkFeed.make()
    let json = try! JSONEncoder().encode(feed)
    Benchmark("Feed JSON decode (size \(json.count) B)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try JSONDecoder().decode([Article].self, from: json))
        }
    }
}
