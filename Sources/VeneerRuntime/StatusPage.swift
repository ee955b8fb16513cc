import Foundation
import HTTPTypes
import NIOCore
import VeneerCore
import VeneerServer

/// The status page (`GET /-/` from a browser): one HTML document served from the binary,
/// no CDN and no build step. Everything is rendered on the server, so the page is complete
/// without JavaScript (reload it to see new figures); its script only keeps it live: it
/// reads `GET /-/status` every two seconds and adds each request `GET /-/events` streams.
///
/// Safety: every text from outside (paths, accounts, reasons, notes) is escaped here, and the
/// script builds rows with `textContent`, never markup. The answer forbids framing (no
/// clickjacking of its buttons) and runs only its own script (`Content-Security-Policy`
/// with a nonce). Its buttons are forms posting to the admin API, which the edge takes only
/// from the page's own origin (`Origin`, `Sec-Fetch-Site: same-origin`).
enum StatusPage {
    /// The page's answer, with its security headers.
    static func response(_ snapshot: StatusSnapshot) -> ProxyResponse {
        let nonce = Self.nonce()
        let html = render(snapshot, nonce: nonce)
        return ProxyResponse(status: .ok, headers: [
            .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
            .contentSecurityPolicy: "default-src 'none'; script-src 'nonce-\(nonce)'; style-src 'nonce-\(nonce)'; connect-src 'self'; "
                + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            xFrameOptions: "DENY", .xContentTypeOptions: "nosniff", referrerPolicy: "same-origin",
        ], body: ByteBuffer(string: html))
    }

    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
    /// `same-origin`, not `no-referrer`: under `no-referrer` Chromium sends `Origin: null`
    /// with the page's own form posts, which the edge (rightly) refuses.
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!

    /// A fresh nonce per answer (16 random bytes, hex).
    static func nonce() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// `text` safe inside HTML text and double-quoted attributes.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                // Control characters have no business on the page.
                if character.value < 0x20 || character.value == 0x7F { out += "\u{FFFD}" } else { out.unicodeScalars.append(character) }
            }
        }
        return out
    }

    /// A figure's value as shown.
    static func shown(_ value: JSONValue) -> String {
        switch value {
        case .null: return "–"
        case .string(let text): return text
        case .number(let text): return text
        case .bool(let flag): return flag ? "yes" : "no"
        default: return String(buffer: value.buffer)
        }
    }

    /// `12:03:04` of an item's time (UTC, as the access log).
    static func clock(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970) % 86_400
        return String(format: "%02d:%02d:%02d", seconds / 3600, seconds / 60 % 60, seconds % 60)
    }

    /// What the chain noted for a request, in a few words (`cache miss stored · upstream 12.3 ms`).
    static func notes(_ item: RequestFeed.Item) -> String {
        // Who called, when the kernel said (a Unix socket, `peer_identity`): first in the row.
        let caller = item.peer.map { peer in
            (["uid \(peer.uid)"] + (peer.pid.map { ["pid \($0)"] } ?? []) + (peer.unit.map { [$0] } ?? [])).joined(separator: " ")
        }
        guard let record = item.record else { return caller ?? "" }
        let callerNotes: [String] = caller.map { [$0] } ?? []
        return (callerNotes + record.entries.map { entry -> String in
            var text = entry.name
            if !entry.detail.isEmpty { text += " " + entry.detail }
            if let duration = entry.duration {
                text += " " + RequestFeed.milliseconds(duration) + " ms"
            }
            return text
        }).joined(separator: " · ")
    }

    static func render(_ snapshot: StatusSnapshot, nonce: String) -> String {
        var html = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Veneer · \(escape(snapshot.environment))</title>
        <style nonce="\(nonce)">\(css)</style></head>
        <body>
        <header><h1>Veneer <span id="environment">\(escape(snapshot.environment))</span></h1>
        <p class="meta">generation <span id="generation">\(snapshot.generation)</span> · \(escape(snapshot.version)) · \(escape(snapshot.config)) ·
        <span id="health" class="\(snapshot.healthProblems.isEmpty ? "ok" : "bad")">\(snapshot.healthProblems.isEmpty ? "healthy" : "degraded: " + escape(snapshot.healthProblems.joined(separator: "; ")))</span></p>

        """
        // The switcher: a plain form, so it works without JavaScript.
        html += "<form id=\"switch\" method=\"post\" action=\"/-/environment\"><label>Environment <select name=\"environment\"\(snapshot.switchRefusal == nil ? "" : " disabled")>"
        for name in snapshot.environments {
            html += "<option value=\"\(escape(name))\"\(name == snapshot.environment ? " selected" : "")>\(escape(name))</option>"
        }
        html += "</select></label> <button\(snapshot.switchRefusal == nil ? "" : " disabled")>Switch</button>"
        if let refusal = snapshot.switchRefusal { html += " <span class=\"note\">\(escape(refusal))</span>" }
        html += "</form></header>\n<main>\n<h2>Chain</h2>\n<ol id=\"chain\" class=\"chain\">\n"
        for (index, box) in snapshot.chain.enumerated() {
            html += "<li class=\"box \(box.role)\" data-box=\"\(index)\" data-name=\"\(escape(box.name))\"><h3>\(escape(box.name))</h3>"
            if box.figures.isEmpty {
                html += "<p class=\"note\">\(box.role == "origin" ? "answers the requests" : "passes requests on")</p>"
            } else {
                html += "<dl>"
                for figure in box.figures {
                    html += "<dt>\(escape(figure.name.replacingOccurrences(of: "_", with: " ")))</dt><dd data-figure=\"\(escape(figure.name))\">\(escape(shown(figure.value)))</dd>"
                }
                html += "</dl>"
            }
            html += "</li>\n"
        }
        html += "</ol>\n"
        if let charts = snapshot.charts { html += StatusCharts.render(charts) }
        for table in snapshot.tables { html += render(table) }
        html += "<h2>Last requests <span class=\"note\" id=\"live\">(reload the page to update)</span></h2>\n"
        html += "<table id=\"requests\"><thead><tr><th>time</th><th>method</th><th>path</th><th>status</th><th>ms</th><th>what happened</th></tr></thead><tbody>\n"
        for item in snapshot.requests.reversed() {
            html += "<tr data-sequence=\"\(item.sequence)\"><td>\(clock(item.time))</td><td>\(escape(item.method.rawValue))</td><td class=\"path\">\(escape(item.path))</td>"
                + "<td class=\"status s\(item.status / 100)\">\(item.status)</td>"
                + "<td>\(RequestFeed.milliseconds(item.duration))</td>"
                + "<td>\(escape(notes(item)))</td></tr>\n"
        }
        html += "</tbody></table>\n</main>\n<script nonce=\"\(nonce)\">\(script)</script>\n</body></html>\n"
        return html
    }

    /// A table of a handler's (``StatusListing``), with what the script needs to redraw it
    /// from `GET /-/status` (its columns and button, as JSON in an attribute).
    static func render(_ table: StatusTable) -> String {
        let width = table.columns.count + (table.action == nil ? 0 : 1)
        var spec: [(String, JSONValue)] = [
            ("columns", .array(table.columns.map { column in
                .object([("key", .string(column.key)), ("missing", .string(column.missing)), ("monospace", .bool(column.monospace))])
            })),
            ("empty", .string(table.empty)),
        ]
        if let action = table.action {
            spec.append(("action", .object([
                ("label", .string(action.label)), ("path", .string(action.pathPrefix)), ("key", .string(action.key)),
                ("fields", .array(action.fields.map { .array([.string($0.name), .string($0.value)]) })),
            ])))
        }
        var html = "<h2>\(escape(table.title))</h2>\n<table id=\"\(escape(table.name))\" data-status-table=\"\(escape(table.name))\" "
            + "data-spec=\"\(escape(String(buffer: JSONValue.object(spec).buffer)))\"><thead><tr>"
        for column in table.columns { html += "<th>\(escape(column.heading))</th>" }
        if table.action != nil { html += "<th></th>" }
        html += "</tr></thead><tbody>\n"
        if table.rows.isEmpty { html += "<tr class=\"empty\"><td colspan=\"\(width)\">\(escape(table.empty))</td></tr>\n" }
        for row in table.rows {
            html += "<tr>"
            for column in table.columns {
                let value = row[column.key].flatMap { $0 == .null ? nil : shown($0) } ?? column.missing
                html += "<td class=\"\(escape(column.key))\(column.monospace ? " mono" : "")\">\(escape(value))</td>"
            }
            if let action = table.action {
                let key = row[action.key]?.stringValue ?? ""
                html += "<td><form method=\"post\" action=\"\(escape(action.pathPrefix + percentEncoded(key)))\">"
                for field in action.fields {
                    html += "<input type=\"hidden\" name=\"\(escape(field.name))\" value=\"\(escape(field.value))\">"
                }
                html += "<button>\(escape(action.label))</button></form></td>"
            }
            html += "</tr>\n"
        }
        return html + "</tbody></table>\n"
    }

    /// A row's key as one path segment. Dots are encoded too: a browser resolves a segment
    /// `.` or `..` in a form's action away, and the button would post elsewhere.
    static func percentEncoded(_ text: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-_~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    static let css = """
    body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
    header{background:#1d2330;color:#fff;padding:12px 24px}header h1{margin:0;font-size:20px}
    #environment{background:#3b82f6;border-radius:4px;padding:0 8px;margin-left:6px}
    .meta{margin:4px 0 8px;color:#c8cdd8}.ok{color:#4ade80}.bad{color:#f87171}
    main{padding:8px 24px}h2{font-size:16px;margin:18px 0 8px}
    .chain{display:flex;flex-wrap:wrap;gap:28px;list-style:none;padding:0;margin:0}
    .box{background:#fff;border:1px solid #cfd5df;border-radius:8px;padding:8px 12px;min-width:150px;position:relative}
    .box+.box::before{content:"→";position:absolute;left:-22px;top:40%;color:#8a93a3;font-size:18px}
    .box.origin{border-color:#3b82f6}.box h3{margin:0 0 6px;font-size:14px;font-family:ui-monospace,monospace}
    dl{display:grid;grid-template-columns:auto auto;gap:2px 12px;margin:0}dt{color:#5b6475}dd{margin:0;text-align:right;font-variant-numeric:tabular-nums}
    table{border-collapse:collapse;background:#fff;width:100%;font-size:13px}th,td{border-bottom:1px solid #e4e7ec;padding:3px 8px;text-align:left}
    td.path,td.mono{font-family:ui-monospace,monospace}.s2{color:#15803d}.s3{color:#0369a1}.s4{color:#b45309}.s5{color:#b91c1c}
    .note{color:#8a93a3;font-size:12px}button{cursor:pointer}
    .charts{display:flex;flex-wrap:wrap;gap:16px}.chart{margin:0;background:#fff;border:1px solid #cfd5df;border-radius:8px;padding:6px 10px}
    .chart svg{width:360px;height:100px;display:block}.chart polyline{stroke:#3b82f6;stroke-width:1.5}.chart polyline.p99,.p99{stroke:#f97316;color:#f97316}
    .chart .axis{stroke:#cfd5df}
    """

    /// Keeps the page live; builds every row with `textContent`.
    static let script = """
    (function(){
    \(StatusCharts.script)
    var max=100,tbody=document.querySelector('#requests tbody');
    var generation=document.getElementById('generation').textContent;
    document.getElementById('live').textContent='(live)';
    function cell(tr,text,cls){var td=document.createElement('td');td.textContent=text;if(cls)td.className=cls;tr.appendChild(td);}
    function ms(v){return v==null?'':String(v);}
    function caller(e){var p=e.peer;return p?['uid '+p.uid+(p.pid!=null?' pid '+p.pid:'')+(p.unit?' '+p.unit:'')]:[];}
    function notes(e){return caller(e).concat((e.entries||[]).map(function(n){return n.name+(n.detail?' '+n.detail:'')+(n.duration_ms!=null?' '+n.duration_ms+' ms':'');})).join(' · ');}
    function add(e){
      if(tbody.querySelector('tr[data-sequence="'+e.sequence+'"]'))return;
      var tr=document.createElement('tr');tr.setAttribute('data-sequence',e.sequence);
      cell(tr,e.time.substr(11,8));cell(tr,e.method);cell(tr,e.path,'path');cell(tr,String(e.status),'status s'+Math.floor(e.status/100));
      cell(tr,ms(e.duration_ms));cell(tr,notes(e));tbody.insertBefore(tr,tbody.firstChild);
      while(tbody.children.length>max)tbody.removeChild(tbody.lastChild);
    }
    function tables(s){
      document.querySelectorAll('table[data-status-table]').forEach(function(t){
        var list=s[t.getAttribute('data-status-table')],spec=JSON.parse(t.getAttribute('data-spec')),body=t.querySelector('tbody');if(!list)return;
        var key=JSON.stringify(list);if(body.getAttribute('data-key')===key)return;body.setAttribute('data-key',key);
        while(body.firstChild)body.removeChild(body.firstChild);
        if(!list.length){var tr=document.createElement('tr');tr.className='empty';var td=document.createElement('td');td.colSpan=spec.columns.length+(spec.action?1:0);td.textContent=spec.empty;tr.appendChild(td);body.appendChild(tr);return;}
        list.forEach(function(row){
          var tr=document.createElement('tr');
          spec.columns.forEach(function(c){var v=row[c.key];cell(tr,v==null?c.missing:String(v),c.key+(c.monospace?' mono':''));});
          if(spec.action){
            var a=spec.action,td=document.createElement('td'),f=document.createElement('form'),btn=document.createElement('button');
            f.method='post';f.action=a.path+encodeURIComponent(String(row[a.key]||'')).replace(/[.!'()*]/g,function(c){return '%'+c.charCodeAt(0).toString(16).toUpperCase();});
            a.fields.forEach(function(p){var i=document.createElement('input');i.type='hidden';i.name=p[0];i.value=p[1];f.appendChild(i);});
            btn.textContent=a.label;f.appendChild(btn);td.appendChild(f);tr.appendChild(td);
          }
          body.appendChild(tr);});
      });
    }
    function figures(s){
      // Another chain (a reload, a switch: each makes a new generation): its boxes are drawn by the server.
      if(String(s.chain_generation)!==generation){location.reload();return;}
      s.chain.forEach(function(box,i){Object.keys(box.figures).forEach(function(k){
        var dd=document.querySelector('[data-box="'+i+'"] [data-figure="'+k+'"]');if(!dd)return;
        var v=box.figures[k];dd.textContent=v==null?'–':String(v);});});
      var h=document.getElementById('health');h.textContent=s.status==='ok'?'healthy':'degraded: '+(s.problems||[]).join('; ');h.className=s.status==='ok'?'ok':'bad';
      tables(s);charts(s.charts);
    }
    function poll(){fetch('/-/status',{headers:{Accept:'application/json'}}).then(function(r){return r.json();}).then(figures).catch(function(){});}
    setInterval(poll,2000);
    if(window.EventSource){var last=tbody.firstElementChild;var es=new EventSource('/-/events'+(last?'?after='+last.getAttribute('data-sequence'):''));
      es.addEventListener('request',function(m){try{add(JSON.parse(m.data));}catch(x){}});}
    })();
    """
}
