import Foundation
import VeneerCore
import VeneerServer

/// The status page's charts of the environment's last 15 minutes (``TrafficHistory``):
/// request rate, cache hit ratio, p50 and p99 latency, drawn by the binary as inline SVG
/// (no script library: the page is complete without JavaScript, and its CSP is unchanged: the
/// SVG has presentation attributes and classes, no `style` attribute). The page's script
/// redraws them from `GET /-/status`'s `charts` with the same geometry (``points(_:max:)``
/// and its JavaScript twin in ``script``).
enum StatusCharts {
    static let width = 360.0
    static let height = 100.0
    static let pad = 4.0

    /// `GET /-/status`'s `charts`.
    static func json(_ series: TrafficHistory.Series) -> JSONValue {
        func numbers(_ values: [Double?]) -> JSONValue {
            .array(values.map { $0.map { .number(String(format: "%.3f", $0)) } ?? .null })
        }
        return .object([
            ("bucket_seconds", .int(TrafficHistory.bucketSeconds)), ("rate", numbers(series.rate)), ("hit_ratio", numbers(series.hitRatio)),
            ("p50_ms", numbers(series.p50)), ("p99_ms", numbers(series.p99)),
        ])
    }

    /// A polyline's points: index across, value up from the bottom, `max` at the top; nil skipped.
    static func points(_ values: [Double?], max: Double) -> String {
        let step = width / Double(Swift.max(1, values.count - 1))
        var out: [String] = []
        for (index, value) in values.enumerated() {
            guard let value else { continue }
            let y = height - pad - Swift.min(value, max) / max * (height - 2 * pad)
            // A lone value is drawn as a short dash ending where it stands: a line needs two points.
            if values.count(where: { $0 != nil }) == 1 { out.append(String(format: "%.1f,%.1f", Double(index) * step - 3, y)) }
            out.append(String(format: "%.1f,%.1f", Double(index) * step, y))
        }
        return out.joined(separator: " ")
    }

    static func number(_ value: Double) -> String { String(format: "%.1f", value) }

    /// The three charts, as the page shows them when it loads.
    static func render(_ series: TrafficHistory.Series) -> String {
        let rateMax = Swift.max(1, series.rate.max() ?? 0)
        let latencies = (series.p50 + series.p99).compactMap { $0 }
        let latencyMax = Swift.max(1, latencies.max() ?? 0)
        let ratio = series.hitRatio.map { $0.map { $0 * 100 } }
        func chart(_ name: String, _ title: String, _ lines: [(String, [Double?])], max: Double, label: String, now: String) -> String {
            var html = "<figure class=\"chart\"><figcaption>\(title) <span class=\"note\" data-chart-max=\"\(name)\">\(label)</span>"
                + " <span class=\"note\" data-chart-now=\"\(name)\">\(now)</span></figcaption>"
                + "<svg data-chart=\"\(name)\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"\(title), last 15 minutes\">"
                + "<line class=\"axis\" x1=\"0\" y1=\"\(height - pad)\" x2=\"\(width)\" y2=\"\(height - pad)\"/>"
            for (kind, values) in lines {
                html += "<polyline class=\"\(kind)\" fill=\"none\" points=\"\(points(values, max: max))\"/>"
            }
            return html + "</svg></figure>"
        }
        let last = { (values: [Double?]) -> String in values.last.flatMap { $0 }.map(number) ?? "–" }
        return "<h2>Last 15 minutes</h2>\n<div id=\"charts\" class=\"charts\">"
            + chart("rate", "requests/s", [("line", series.rate.map(Optional.some))], max: rateMax, label: "max \(number(rateMax))",
                    now: "now \(last(series.rate.map(Optional.some)))")
            + chart("hit_ratio", "cache hit ratio %", [("line", ratio)], max: 100, label: "max 100", now: "now \(last(ratio))")
            + chart("latency", "latency ms (p50, <span class=\"p99\">p99</span>)", [("line", series.p50), ("p99", series.p99)], max: latencyMax,
                    label: "max \(number(latencyMax))", now: "now \(last(series.p50)) / \(last(series.p99))")
            + "</div>\n"
    }

    /// The charts' part of the page's script: redraws them from `/-/status`.
    static let script = """
    function pts(v,max){var n=v.length,o=[],step=360/Math.max(1,n-1),lone=v.filter(function(x){return x!=null;}).length===1;
      for(var i=0;i<n;i++){var x=v[i];if(x==null)continue;var y=(100-4-Math.min(x,max)/max*92).toFixed(1);
      if(lone)o.push((i*step-3).toFixed(1)+','+y);o.push((i*step).toFixed(1)+','+y);}return o.join(' ');}
    function lastOf(v){var x=v[v.length-1];return x==null?'–':x.toFixed(1);}
    function draw(name,series,max,label,now){var svg=document.querySelector('svg[data-chart="'+name+'"]');if(!svg)return;
      var lines=svg.querySelectorAll('polyline');series.forEach(function(s,i){if(lines[i])lines[i].setAttribute('points',pts(s,max));});
      var m=document.querySelector('[data-chart-max="'+name+'"]');if(m)m.textContent=label;
      var w=document.querySelector('[data-chart-now="'+name+'"]');if(w)w.textContent=now;}
    function charts(c){if(!c)return;
      var num=function(v){return v==null?null:Number(v);};
      var rate=c.rate.map(num),ratio=c.hit_ratio.map(function(v){return v==null?null:Number(v)*100;}),p50=c.p50_ms.map(num),p99=c.p99_ms.map(num);
      var rmax=Math.max(1,Math.max.apply(null,rate));draw('rate',[rate],rmax,'max '+rmax.toFixed(1),'now '+lastOf(rate));
      draw('hit_ratio',[ratio],100,'max 100','now '+lastOf(ratio));
      var lmax=Math.max(1,Math.max.apply(null,p50.concat(p99).map(function(v){return v||0;})));
      draw('latency',[p50,p99],lmax,'max '+lmax.toFixed(1),'now '+lastOf(p50)+' / '+lastOf(p99));}
    """
}
