import Foundation
import Testing
@testable import Strata

@Suite("HTTPDate")
struct HTTPDateTests {
    /// RFC 9110 §5.6.7's example instant.
    let sunday = Date(timeIntervalSince1970: 784_111_777)
    let now = Date(timeIntervalSince1970: 1_795_000_000)  // 2026-11-18

    @Test func formatsIMFFixdate() {
        #expect(HTTPDate.string(from: sunday) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.string(from: Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.string(from: Date(timeIntervalSince1970: 951_782_400.75)) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: -1)) == "Wed, 31 Dec 1969 23:59:59 GMT")
    }

    @Test func parsesAllThreeForms() {
        #expect(HTTPDate.date(from: "Sun, 06 Nov 1994 08:49:37 GMT") == sunday)
        #expect(HTTPDate.date(from: "Sunday, 06-Nov-94 08:49:37 GMT", now: now) == sunday)
        #expect(HTTPDate.date(from: "Sun Nov  6 08:49:37 1994") == sunday)
        #expect(HTTPDate.date(from: "Sun Nov 16 08:49:37 1994") == sunday.addingTimeInterval(10 * 86_400))
        #expect(HTTPDate.date(from: " \tSun, 06 Nov 1994 08:49:37 GMT ") == sunday)
    }

    @Test func readsTwoDigitYearsWithinFiftyYears() {
        // In 2026: "70" is 44 years ahead, so 2070; "94" would be 68 years ahead, so 1994.
        let in2070 = HTTPDate.date(from: "Friday, 01-Feb-70 00:00:00 GMT", now: now)
        #expect(in2070 == HTTPDate.date(from: "Sat, 01 Feb 2070 00:00:00 GMT"))
        #expect(HTTPDate.date(from: "Sunday, 06-Nov-94 08:49:37 GMT", now: now) == sunday)
        #expect(HTTPDate.date(from: "Sunday, 06-Nov-26 08:49:37 GMT", now: now) == HTTPDate.date(from: "Fri, 06 Nov 2026 08:49:37 GMT"))
    }

    @Test(arguments: [
        "", "garbage", "0", "-1",
        "Sun, 06 Nov 1994 25:49:37 GMT",  // hour
        "Sun, 06 Nov 1994 08:60:37 GMT",  // minute
        "Sun, 06 Foo 1994 08:49:37 GMT",  // month
        "Sun, 06 Nov 1994 08:49:37 PST",  // zone
        "Sun, 06 Nov 1994 08:49:37",  // no zone
        "Xyz, 06 Nov 1994 08:49:37 GMT",  // day name
        "Sunday, 06-Nov-94 08:49:37 PST",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",  // asctime pads the day with a space
        "Sun Nov  6 08:49:37 94",
        "1994-11-06T08:49:37Z",
    ])
    func rejectsInvalidInput(_ text: String) {
        #expect(HTTPDate.date(from: text, now: now) == nil)
    }

    @Test func rejectsDaysTheMonthDoesNotHave() {
        #expect(HTTPDate.Fields(year: 1994, month: 2, day: 29, hour: 0, minute: 0, second: 0).date == nil)
        #expect(HTTPDate.Fields(year: 1994, month: 11, day: 31, hour: 0, minute: 0, second: 0).date == nil)
        #expect(HTTPDate.Fields(year: 2000, month: 2, day: 29, hour: 0, minute: 0, second: 0).date != nil)
        #expect(HTTPDate.date(from: "Sunday, 31-Nov-94 08:49:37 GMT", now: now) == nil)
        #expect(HTTPDate.date(from: "Sun Feb 30 08:49:37 1994") == nil)
    }

    @Test func roundTrips() {
        for seconds in stride(from: -2_208_988_800.0, to: 4_102_444_800, by: 7_654_321.0) {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(HTTPDate.date(from: HTTPDate.string(from: date)) == date)
            #expect(HTTPDate.date(from: HTTPDate.format(date)) == date)
        }
    }

    /// Before `HTTPDate`, `Expires` in the obsolete forms read as "already expired".
    @Test func expiresInAnObsoleteFormCounts() {
        let headerFields = fields(["Date": "Sun Nov  6 08:49:37 1994", "Expires": "Sunday, 06-Nov-94 09:49:37 GMT"])
        #expect(headerFields.freshnessLifetime(receivedAt: sunday) == .seconds(3600))
    }
}
