import Foundation
import Testing
import VeneerTestSupport

/// The status page in a real browser: Debian's `chromium`, headless, loading it from a
/// running Veneer (`make test` installs chromium when it is missing).
@Suite("the status page in headless chromium", .serialized)
struct StatusPageBrowserTests {
    /// The text of the element `selector` selects in `dom`, from `--dump-dom`.
    static func text(_ dom: String, figure: String, of box: String) -> String? {
        guard let start = dom.range(of: "data-name=\"\(box)\"") else { return nil }
        let rest = dom[start.upperBound...]
        guard let figureStart = rest.range(of: "data-figure=\"\(figure)\">") else { return nil }
        return String(rest[figureStart.upperBound...].prefix { $0 != "<" })
    }

    static func rows(_ dom: String) -> Int {
        dom.components(separatedBy: "<tr data-sequence=").count - 1
    }

    @Test("--dump-dom before and after requests: the chain as boxes, counters that move, the requests listed, the page's own script running")
    func dumpDOM() async throws {
        try await StatusPageProcessTests.withInstance { port in
            let url = "http://127.0.0.1:\(port)/-/"
            let before = try await HeadlessChromium.dumpDOM(url)
            for box in ["cache", "block_list", "fault", "auth_refresh", "upstream"] { #expect(before.contains("data-name=\"\(box)\""), "\(box)") }
            #expect(Self.text(before, figure: "hits", of: "cache") == "0")
            #expect(Self.rows(before) == 0)
            #expect(before.contains("<span class=\"note\" id=\"live\">(live)</span>"), "the script ran (its nonce let it)")

            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/2", headers: [("Veneer-Fault", "status=503")]).status == 503)

            let after = try await HeadlessChromium.dumpDOM(url)
            #expect(Self.text(after, figure: "hits", of: "cache") == "1")
            #expect(Self.text(after, figure: "misses", of: "cache") == "2")
            #expect(Self.text(after, figure: "aborted", of: "fault") == "1")
            #expect(Self.text(after, figure: "refreshes", of: "auth_refresh") == "1")
            #expect(Self.rows(after) == 3)
            #expect(after.contains("fault abort 503"))
        }
    }

    @Test("the charts: inline SVG drawn by the binary, readable without JavaScript; on an open page the curves move after traffic, with no reload")
    func chartsMove() async throws {
        try await StatusPageProcessTests.withInstance { port in
            let url = "http://127.0.0.1:\(port)/-/"
            // Without the script (the page as served): three charts, their curves already drawn.
            let served = try await RawHTTP.request(port: port, "GET", "/-/", headers: [("Accept", "text/html")]).text
            for name in ["rate", "hit_ratio", "latency"] { #expect(served.contains("<svg data-chart=\"\(name)\""), "\(name)") }
            #expect(served.components(separatedBy: "<polyline").count - 1 == 4)
            try await HeadlessChromium.withPage { page in
                try await page.navigate(url)
                try await page.waitUntil("document.getElementById('live').textContent === '(live)'")
                let rate = "document.querySelector('svg[data-chart=rate] polyline').getAttribute('points')"
                let latency = "document.querySelector('svg[data-chart=latency] polyline.p99').getAttribute('points')"
                let before = try await page.evaluate(rate) as? String ?? ""
                try await page.evaluate("window.marker = 'same page'")
                for _ in 0..<5 { #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200) }
                // Polled every two seconds: the rate's curve leaves its baseline, latency and hit ratio get curves.
                try await page.waitUntil("\(rate) !== '\(before)'")
                try await page.waitUntil("\(latency).length > 0")
                try await page.waitUntil("document.querySelector('svg[data-chart=hit_ratio] polyline').getAttribute('points').length > 0")
                #expect(try await page.evaluate("window.marker") as? String == "same page", "redrawn in place")
                #expect(try await page.evaluate("document.querySelectorAll('svg[data-chart] [style]').length") as? Int == 0, "no style attribute (CSP)")
                // A picture of the page after the traffic; VENEER_WRITE_DOCS=1 makes it docs/status-charts.png.
                _ = try await page.call("Emulation.setDeviceMetricsOverride", ["width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false])
                let shot = try await page.call("Page.captureScreenshot", ["format": "png"])
                let png = Data(base64Encoded: shot["data"] as? String ?? "") ?? Data()
                #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG")
                if ProcessInfo.processInfo.environment["VENEER_WRITE_DOCS"] == "1" {
                    let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                    try png.write(to: docs.appendingPathComponent("docs/status-charts.png"))
                }
            }
        }
    }

    @Test("an open page stays live (counters polled, requests streamed by server-sent events), and its unblock button lifts a block as the browser submits it")
    func livePageAndUnblockButton() async throws {
        try await StatusPageProcessTests.withInstance { port in
            try await HeadlessChromium.withPage { page in
                try await page.navigate("http://127.0.0.1:\(port)/-/")
                try await page.waitUntil("document.getElementById('live').textContent === '(live)'")
                let hits = "document.querySelector('[data-name=cache] [data-figure=hits]').textContent"
                #expect(try await page.evaluate(hits) as? String == "0")

                // Requests while the page is open: it is not reloaded.
                try await page.evaluate("window.marker = 'same page'")
                #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
                #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
                #expect(try await RawHTTP.request(port: port, "GET", "/posts/3", headers: [("X-Account-Id", StatusPageProcessTests.markupAccount)]).status == 403)
                try await page.waitUntil("\(hits) === '1'")
                try await page.waitUntil("document.querySelectorAll('#requests tbody tr').length === 3")
                #expect(try await page.evaluate("document.querySelector('#requests tbody tr td.path').textContent") as? String == "/posts/3",
                        "newest first")
                try await page.waitUntil("document.querySelectorAll('#blocks tbody form').length === 1")
                #expect(try await page.evaluate("document.querySelector('#blocks td.account').textContent") as? String
                            == StatusPageProcessTests.markupAccount, "shown as text")
                #expect(try await page.evaluate("document.querySelectorAll('#blocks img').length") as? Int == 0, "never as markup")
                #expect(try await page.evaluate("window.marker") as? String == "same page")

                // The button, clicked: the browser posts the form with its Origin and Sec-Fetch-Site.
                try await page.evaluate("document.querySelector('#blocks form button').click()")
                try await page.waitUntil("window.marker === undefined && document.readyState === 'complete' && location.pathname === '/-/'")
                try await page.waitUntil("document.querySelector('#blocks tr.empty') !== null")
                let blocks = try await RawHTTP.request(port: port, "GET", "/-/blocks")
                #expect(blocks.text.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
                #expect(try await RawHTTP.request(port: port, "GET", "/posts/3", headers: [("X-Account-Id", "someone")]).status == 200)
            }
        }
    }

    @Test("a page of another origin cannot make the browser change anything: its form post to the admin API is refused")
    func crossSiteFormRefused() async throws {
        try await StatusPageProcessTests.withInstance { port in
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/3", headers: [("X-Account-Id", StatusPageProcessTests.markupAccount)]).status == 403)
            try await HeadlessChromium.withPage { page in
                // A page elsewhere (an opaque data: origin) that posts the unblock form and the switch form on load.
                let account = StatusPageProcessTests.markupAccount.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let attack = """
                <form id=f method=post action="http://127.0.0.1:\(port)/-/blocks/\(account)"><input type=hidden name=action value=unblock></form>
                <script>document.getElementById('f').submit()</script>
                """
                try await page.call("Page.navigate", ["url": "data:text/html," + attack.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!])
                try await page.waitUntil("location.href.startsWith('http://127.0.0.1:\(port)/-/blocks/') && document.readyState === 'complete'")
                #expect((try await page.evaluate("document.body.innerText") as? String)?.contains("cross_site_refused") == true)
                let blocks = try await RawHTTP.request(port: port, "GET", "/-/blocks")
                #expect(blocks.text.contains("onerror"), "the block stays")
            }
        }
    }

    @Test("the switcher: choosing staging and pressing Switch serves staging (the page shows its chain), and back")
    func switcher() async throws {
        try await StatusPageProcessTests.withInstance { port in
            try await HeadlessChromium.withPage { page in
                try await page.navigate("http://127.0.0.1:\(port)/-/")
                for (target, origin) in [("staging", "mock"), ("development", "upstream")] {
                    try await page.evaluate("document.querySelector('#switch select').value = '\(target)'; document.querySelector('#switch button').click()")
                    try await page.waitUntil("document.readyState === 'complete' && document.getElementById('environment') !== null"
                                             + " && document.getElementById('environment').textContent === '\(target)'")
                    #expect(try await page.evaluate("document.querySelector('#chain li:last-child').getAttribute('data-name')") as? String == origin)
                    let health = try await RawHTTP.request(port: port, "GET", "/-/health")
                    #expect(health.json?["environment"] as? String == target)
            }
            }
        }
    }
}
