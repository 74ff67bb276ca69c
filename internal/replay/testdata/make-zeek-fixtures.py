#!/usr/bin/env python3
"""Writes zeek-tls-conn.log, zeek-tls-ssl.log (TSV) and zeek-tls-conn.json,
zeek-tls-ssl.json, zeek-tls-conn-iso8601.json, zeek-tls-ssl-iso8601.json,
zeek-tls-conn-millis.json (JSON) for tls-lo.pcap.

Zeek is not packaged for Debian 12, so these logs are not Zeek's output:
they are what `zeek -r tls-lo.pcap` writes by its published field lists
(base/protocols/conn/main.zeek and base/protocols/ssl/main.zeek with
ssl/files.zeek, Zeek 7.1 to 8.x: conn.log ends in ip_proto), with the
counts read from the capture by tshark (apt-get install tshark):
orig_bytes/resp_bytes the TCP payload, *_ip_bytes the IP total lengths,
duration from the first packet to the last FIN (Zeek leaves out the final
ACK). With a real Zeek instead:
    zeek -C -r tls-lo.pcap                                  # TSV
    zeek -C -r tls-lo.pcap LogAscii::use_json=T             # JSON, ts as epoch
    zeek -C -r tls-lo.pcap LogAscii::use_json=T \\
        LogAscii::json_timestamps=JSON::TS_ISO8601          # JSON, ISO 8601
    (and JSON::TS_MILLIS for zeek-tls-conn-millis.json: ts in milliseconds)
"""
import collections, datetime, json, os, subprocess, sys

os.chdir(os.path.dirname(os.path.abspath(__file__)))
PCAP = "tls-lo.pcap"
fields = ["tcp.stream", "frame.time_epoch", "ip.src", "ipv6.src", "tcp.srcport", "ip.dst", "ipv6.dst",
          "tcp.dstport", "tcp.len", "ip.len", "ipv6.plen", "tcp.flags.fin", "tcp.flags.syn", "tcp.flags.reset"]
out = subprocess.run(["tshark", "-r", PCAP, "-T", "fields", "-E", "separator=,"] + sum([["-e", f] for f in fields], []),
                     check=True, capture_output=True, text=True).stdout
snis = {}
for line in subprocess.run(["tshark", "-r", PCAP, "-Y", "tls.handshake.type==1", "-T", "fields", "-E", "separator=,",
                            "-e", "tcp.stream", "-e", "tls.handshake.extensions_server_name"],
                           check=True, capture_output=True, text=True).stdout.splitlines():
    s, name = line.split(",")
    snis[int(s)] = name

# Fixed uids in Zeek's form (C and 17 base62 characters), by stream.
UIDS = ["CwjjYJ2WqgTbAqiHl6", "CDsGwa3BJqUUgWu3x5", "C3yQi81m9p8YbZzgq1", "CkbGyu4VnoFbRn7hx2",
        "CMmXZb2kQb0ZbDvDy3", "CqeAHd1G9h4pKx0rV4"]

conns = collections.OrderedDict()
for line in out.splitlines():
    (stream, ts, s4, s6, sp, d4, d6, dp, tlen, iplen, plen, fin, syn, rst) = line.split(",")
    stream = int(stream)
    src, dst = s4 or s6, d4 or d6
    c = conns.get(stream)
    if c is None:
        c = conns[stream] = dict(ts=float(ts), orig=(src, int(sp)), resp=(dst, int(dp)), last=float(ts), fin=0.0,
                                 ob=0, rb=0, op=0, rp=0, oip=0, rip=0, syn=False, synack=False, rst=False, fins=0)
    orig = (src, int(sp)) == c["orig"]
    ip = int(iplen) if iplen else int(plen) + 40
    k = "o" if orig else "r"
    c[k + "b"] += int(tlen)
    c[k + "p"] += 1
    c[k + "ip"] += ip
    c["last"] = float(ts)
    if fin == "1":
        c["fin"] = float(ts)
        c["fins"] += 1
    if rst == "1":
        c["rst"] = True
        c["fin"] = float(ts)
    if syn == "1" and not orig:
        c["synack"] = True

def conn_row(i, c):
    rej = c["rst"] and not c["synack"]
    dur = c["fin"] - c["ts"]
    return collections.OrderedDict([
        ("ts", c["ts"]), ("uid", UIDS[i]),
        ("id.orig_h", c["orig"][0]), ("id.orig_p", c["orig"][1]),
        ("id.resp_h", c["resp"][0]), ("id.resp_p", c["resp"][1]),
        ("proto", "tcp"), ("service", None if rej else "ssl"),
        ("duration", None if rej else dur), ("orig_bytes", None if rej else c["ob"]), ("resp_bytes", None if rej else c["rb"]),
        ("conn_state", "REJ" if rej else "SF"), ("local_orig", None), ("local_resp", None), ("missed_bytes", 0),
        ("history", "Sr" if rej else "ShADadFf"),
        ("orig_pkts", c["op"]), ("orig_ip_bytes", c["oip"]), ("resp_pkts", c["rp"]), ("resp_ip_bytes", c["rip"]),
        ("tunnel_parents", None), ("ip_proto", 6),
    ])

CONN_TYPES = ["time", "string", "addr", "port", "addr", "port", "enum", "string", "interval", "count", "count",
              "string", "bool", "bool", "count", "string", "count", "count", "count", "count", "set[string]", "count"]

def ssl_row(i, c):
    # TLS 1.3 hides the certificate and ALPN answer: Zeek leaves them out.
    return collections.OrderedDict([
        ("ts", c["ts"] + 0.000060), ("uid", UIDS[i]),
        ("id.orig_h", c["orig"][0]), ("id.orig_p", c["orig"][1]),
        ("id.resp_h", c["resp"][0]), ("id.resp_p", c["resp"][1]),
        ("version", "TLSv13"), ("cipher", "TLS_AES_256_GCM_SHA384"), ("curve", "x25519"),
        ("server_name", snis.get(i) or None), ("resumed", False), ("last_alert", None), ("next_protocol", None),
        ("established", True), ("ssl_history", "CsiI"), ("cert_chain_fps", []), ("client_cert_chain_fps", []),
        ("sni_matches_cert", None),
    ])

SSL_TYPES = ["time", "string", "addr", "port", "addr", "port", "string", "string", "string", "string", "bool",
             "string", "string", "bool", "string", "vector[string]", "vector[string]", "bool"]

def stamp(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d-%H-%M-%S")

def tsv_value(v):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, float):
        return "%.6f" % v
    if isinstance(v, list):
        return ",".join(v) if v else "(empty)"
    return str(v)

def write_tsv(path, name, rows, types):
    t0 = min(c["ts"] for c in conns.values())
    t1 = max(c["last"] for c in conns.values())
    with open(path, "w") as f:
        f.write("#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n")
        f.write("#path\t%s\n#open\t%s\n" % (name, stamp(t0)))
        f.write("#fields\t" + "\t".join(rows[0].keys()) + "\n")
        f.write("#types\t" + "\t".join(types) + "\n")
        for r in rows:
            f.write("\t".join(tsv_value(v) for v in r.values()) + "\n")
        f.write("#close\t%s\n" % stamp(t1 + 1))

def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

def write_json(path, rows, iso_ts=False, millis=False):
    with open(path, "w") as f:
        for r in rows:
            o = collections.OrderedDict()
            for k, v in r.items():
                if v is None:
                    continue  # Zeek's JSON leaves unset fields out
                if k == "ts" and iso_ts:
                    v = iso(v)
                elif k == "ts" and millis:
                    v = int(v * 1000)
                elif isinstance(v, float):
                    v = round(v, 6)
                o[k] = v
            f.write(json.dumps(o, separators=(",", ":")) + "\n")

conn_rows = [conn_row(i, c) for i, c in enumerate(conns.values())]
ssl_rows = [ssl_row(i, c) for i, c in enumerate(conns.values()) if c["resp"][1] == 443]
write_tsv("zeek-tls-conn.log", "conn", conn_rows, CONN_TYPES)
write_tsv("zeek-tls-ssl.log", "ssl", ssl_rows, SSL_TYPES)
write_json("zeek-tls-conn.json", conn_rows)
write_json("zeek-tls-ssl.json", ssl_rows)
write_json("zeek-tls-conn-iso8601.json", conn_rows, iso_ts=True)
write_json("zeek-tls-ssl-iso8601.json", ssl_rows, iso_ts=True)
write_json("zeek-tls-conn-millis.json", conn_rows, millis=True)
