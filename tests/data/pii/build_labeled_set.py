"""Builds labeled.jsonl: lines as they occur on web pages, with the PII each one contains.

Run from the repository root: python tests/data/pii/build_labeled_set.py
Every value is fictitious or public (documentation ranges are NOT used for positives, since
they are not personal: private/documentation IPs appear as hard negatives instead). Payment
cards are the networks' published test numbers; IBANs are the registry's example accounts
or checksum-valid variants of them.
"""
import json
import pathlib
import random

rng = random.Random(13)
OUT = pathlib.Path(__file__).with_name("labeled.jsonl")
rows = []


def add(text, *pii):
    rows.append({"text": text, "pii": [{"kind": k, "value": v} for k, v in pii]})


# ---- e-mail ------------------------------------------------------------------------------
emails = ["anna.schmidt@posteo.de", "j.doe+newsletter@gmail.com", "info@kanzlei-mueller.de", "press@wikimedia.org",
          "sales.team@acme-widgets.co.uk", "m_rossi@libero.it", "contact@lemire.me", "webmaster@stadt-erfurt.de",
          "o'brien@example.ie".replace("'", ""), "support@help.github.com", "k.tanaka@yahoo.co.jp", "noreply@bahn.de",
          "first.last@sub.domain.example.org", "x@y.io", "hello@startup.ai", "jobs@bmjv.bund.de"]
email_templates = ["Contact us at {}.", "E-Mail: {}", "Send your CV to {} before Friday.",
                   "Questions? Write to {} (we answer within 24h).", "Bei Fragen: {}", "Posted by {} on 12 May 2019",
                   "<{}>", "mailto:{}", "Reply to {}, not to this address.", "Kontakt: {} | Impressum"]
for i, e in enumerate(emails):
    add(email_templates[i % len(email_templates)].format(e), ("EMAIL", e))
add("Write to alice@uni-bonn.de or bob@uni-bonn.de for access.", ("EMAIL", "alice@uni-bonn.de"), ("EMAIL", "bob@uni-bonn.de"))
add("Reach the editor, carla.v@derstandard.at, via the form.", ("EMAIL", "carla.v@derstandard.at"))

# ---- IP addresses ------------------------------------------------------------------------
public_v4 = ["8.8.8.8", "93.184.216.34", "142.250.185.78", "151.101.1.69", "1.1.1.1", "185.199.108.153",
             "104.16.132.229", "213.239.205.78", "46.4.84.240", "203.0.114.5", "81.169.145.156", "52.95.110.1"]
ip_templates = ["Failed login from {} at 03:14.", "The server resolves to {}.", "Client IP: {}", "banned {} for spam",
                "Your IP address is {} - please include it in your ticket.", "{} - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.0\" 200"]
for i, ip in enumerate(public_v4):
    add(ip_templates[i % len(ip_templates)].format(ip), ("IP_ADDRESS", ip))
public_v6 = ["2606:4700:4700::1111", "2a00:1450:4001:82b::200e", "2001:4860:4860::8888", "2a01:4f8:c17:b8f::2",
             "2620:fe::fe", "2600:1406:3a00:21::173e:2e65"]
for i, ip in enumerate(public_v6):
    add(ip_templates[i % len(ip_templates)].format(ip), ("IP_ADDRESS", ip))

# ---- phone numbers -----------------------------------------------------------------------
phones = ["+49 30 12345678", "+49 (0)221 9876543", "+44 20 7946 0958", "+33 1 42 68 53 00", "+1 212-555-0147",
          "+1 (415) 555-0198", "+41 44 668 18 00", "+43 1 53115-0", "+39 06 6988 4321", "+31 20 555 1234",
          "(212) 555-0147", "(617) 253-1000", "415-555-0198", "312.555.0123", "030 12345678", "0221/123456",
          "089 2180 3000", "020 7946 0958", "01 42 68 53 00", "0711-2050-0", "+81 3-3224-9999", "+86 10 6552 9988",
          "+7 495 123-45-67", "+48 22 123 45 67"]
phone_templates = ["Tel.: {}", "Call us on {} (Mon-Fri 9-17).", "Telefon {} | Fax auf Anfrage", "Phone: {}",
                   "Reservations: {}.", "Hotline {}, weekdays only", "Für Rückfragen erreichen Sie uns unter {}.",
                   "Questions? Ring {} or visit our office."]
for i, p in enumerate(phones):
    add(phone_templates[i % len(phone_templates)].format(p), ("PHONE", p))
add("Tel. +49 30 1234567, Fax +49 30 1234568", ("PHONE", "+49 30 1234567"), ("PHONE", "+49 30 1234568"))

# ---- payment cards (published test numbers) -------------------------------------------------
cards = ["4111 1111 1111 1111", "4111111111111111", "5555 5555 5555 4444", "5105-1051-0510-5100", "378282246310005",
         "3782 822463 10005", "6011 1111 1111 1117", "3530 1113 3330 0000", "4012 8888 8888 1881", "2223 0031 2200 3222",
         "4000 0566 5566 5556", "5200 8282 8282 8210"]
card_templates = ["Card number: {}", "Test with {} and any future date.", "Paid with {} on 3 March.",
                  "Kreditkarte {} (Ablauf 12/27)"]
for i, c in enumerate(cards):
    add(card_templates[i % len(card_templates)].format(c), ("CREDIT_CARD", c))

# ---- IBANs ---------------------------------------------------------------------------------
ibans = ["DE89 3704 0044 0532 0130 00", "DE89370400440532013000", "GB82 WEST 1234 5698 7654 32", "FR14 2004 1010 0505 0001 3M02 606",
         "NL91 ABNA 0417 1643 00", "AT61 1904 3002 3457 3201", "CH93 0076 2011 6238 5295 7", "ES91 2100 0418 4502 0005 1332",
         "IT60 X054 2811 1010 0000 0123 456", "BE68 5390 0754 7034", "PL61 1090 1014 0000 0712 1981 2874", "SE45 5000 0000 0583 9825 7466"]
iban_templates = ["IBAN: {}", "Bitte überweisen Sie auf {} (BIC COBADEFFXXX).", "Account {}, reference INV-2291",
                  "Spenden: {}"]
for i, b in enumerate(ibans):
    add(iban_templates[i % len(iban_templates)].format(b), ("IBAN", b))

# ---- mixed lines -------------------------------------------------------------------------
add("Contact: Jan Novak, jan.novak@seznam.cz, +420 224 123 456", ("EMAIL", "jan.novak@seznam.cz"), ("PHONE", "+420 224 123 456"))
add("Impressum: Tel. 030 12345678, E-Mail info@beispiel-gmbh.de, IBAN DE89 3704 0044 0532 0130 00",
    ("PHONE", "030 12345678"), ("EMAIL", "info@beispiel-gmbh.de"), ("IBAN", "DE89 3704 0044 0532 0130 00"))
add("Blocked 8.8.4.4 after 5 attempts; admin notified at ops@example.net", ("IP_ADDRESS", "8.8.4.4"), ("EMAIL", "ops@example.net"))

# ---- more positives in running text -----------------------------------------------------------
add("If you have questions about the event, please email events@tu-berlin.de or call +49 30 314-0.",
    ("EMAIL", "events@tu-berlin.de"), ("PHONE", "+49 30 314-0"))
add("Die Geschäftsstelle ist unter 0341 97-30000 erreichbar.", ("PHONE", "0341 97-30000"))
add("For bookings call (303) 499-7111 and ask for Maria.", ("PHONE", "(303) 499-7111"))
add("Our NOC saw traffic from 185.220.101.4 and 45.33.32.156 overnight.",
    ("IP_ADDRESS", "185.220.101.4"), ("IP_ADDRESS", "45.33.32.156"))
add("Refunds go to the card ending in 4444 (5555 5555 5555 4444).", ("CREDIT_CARD", "5555 5555 5555 4444"))
add("Beitrag bitte an AT61 1904 3002 3457 3201 überweisen.", ("IBAN", "AT61 1904 3002 3457 3201"))
add("Send the signed form to hr-department@firma.example.com.", ("EMAIL", "hr-department@firma.example.com"))
add("Pour toute question : accueil@mairie-lyon.fr ou 04 72 10 30 30.", ("EMAIL", "accueil@mairie-lyon.fr"), ("PHONE", "04 72 10 30 30"))
add("Whois lists abuse@hetzner.com for 88.198.10.20.", ("EMAIL", "abuse@hetzner.com"), ("IP_ADDRESS", "88.198.10.20"))
add("Text or call 202-555-0175 after 6pm.", ("PHONE", "202-555-0175"))
add("Rufen Sie uns an: +49 89 2180-3000.", ("PHONE", "+49 89 2180-3000"))
add("Payment: Visa 4012888888881881, exp. 09/26.", ("CREDIT_CARD", "4012888888881881"))

# ---- hard negatives: things that look like PII and are not ---------------------------------
negatives = [
    # dates and times
    "Published 2023-10-15, updated 2024-01-02.", "Am 01.12.2020 um 14:30 Uhr.", "Deadline: 05/06/2021.",
    "Open 09:00-17:30, Sat 10:00-14:00.", "Period 1990-2000 and 2001-2010.", "Date 01-12-2020 in the log.",
    "Timestamp 2024-05-20T10:15:30Z", "Season 2019/2020 ended.", "Meeting at 12:30:45 UTC.",
    # ISBN / ISSN / DOI / product codes
    "ISBN 978-3-16-148410-0", "ISBN: 0-306-40615-2", "ISSN 0028-0836", "doi:10.1038/nature14539",
    "Art.-Nr. 4006381333931 (EAN)", "Model XPS-15-9570-7823", "SKU 100-200-3000",
    # prices and quantities
    "Price: $1,234.56 incl. VAT", "Nur 19,99 € statt 29,99 €", "Population 83,237,124 (2022)", "Total: 1.234.567,89 EUR",
    "3.5 km north, 120 m altitude", "Revenue grew 12.5% to 4.2 billion", "+3.5% year over year", "Score: +12 points",
    # versions and software
    "Requires Python 3.11.7 and numpy 2.4.6.", "version 1.2.3.4 is out", "Upgrade to v2.0.0.1 now.", "Build 10.0.19045.3693",
    "Firmware 4.3.2.1 fixes the bug.", "Chrome 120.0.6099.109 released", "libc 2.36.9.12.1 (dotted quintuple)",
    "Kernel 6.1.0.18 amd64",
    # private / reserved / documentation IPs
    "Router at 192.168.1.1 by default.", "Bind to 127.0.0.1 only.", "Use 10.0.0.5 inside the VPN.", "Docs use 192.0.2.44.",
    "Netmask 255.255.255.0", "Listen on 0.0.0.0:8080", "Link-local fe80::1ff:fe23:4567:890a", "Loopback ::1", "Example 2001:db8::ff00:42:8329",
    "Multicast 224.0.0.251 for mDNS", "Carrier-grade NAT 100.64.0.1",
    # hashes, ids, keys
    "SHA-1 3f786850e387550fdab836ed7e6dc881de23001b", "md5: d41d8cd98f00b204e9800998ecf8427e",
    "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", "UUID 123e4567-e89b-12d3-a456-426614174000",
    "Order number 1234567812345678 shipped.", "Tracking 1Z999AA10123456784", "Invoice 2024-000123-0001",
    "Ticket #4111111111111112", "Session id 5105105105105101 expired",
    # near-miss cards and IBANs
    "Card 4111 1111 1111 1112 was declined (typo).", "Reference 1234 5678 9012 3456", "DE89 3704 0044 0532 0130 01 is invalid",
    "GB00 WEST 1234 5698 7654 32", "Code XX12 3456 7890 1234",
    # e-mail look-alikes
    "Retina logo: logo@2x.png", "Icons icon@3x.webp and sprite@2x.svg", "Follow @wikimedia on Mastodon.",
    "user@localhost is not routable", "Decorators: @property and @staticmethod", "Price 5 @ $3 each",
    "npm install @types/node@20.1.0",
    # phone look-alikes
    "Call stack depth 030", "Zip 10115 Berlin", "PLZ 01067 Dresden", "Room 0221 on floor 2", "Fax: none",
    "Call 911 in an emergency.", "Extension 0815", "Range 0800-1200 hours", "1-800 numbers are free",
    "Coordinates 52.5200, 13.4050", "Score 3-1 after extra time", "Chapter 12.3.4", "Matrix 1 2 3 4 5 6",
    "Bus 0 21 45 towards city", "+1 for this answer", "Serial 0000-1111", "Phone number format: +XX XXX XXXXXX",
    # code and markup
    "int main() { return 0; }", "color: #fff; margin: 0 auto;", "std::vector<int> v; a::b::c", "time 12:30:45:99",
    "MAC 00:1A:2B:3C:4D:5E", "IPv6 prefix notation ::/0", "CSS ratio 16:9 and 4:3",
]
for text in negatives:
    add(text)

# ---- plain prose (no PII) --------------------------------------------------------------------
prose = [
    "The committee met on Tuesday to discuss the new budget.", "Die Stadt plant einen neuen Radweg entlang des Flusses.",
    "Le musée est ouvert tous les jours sauf le lundi.", "We measured 42 samples in 3 batches of 14.",
    "In 1969, Apollo 11 landed on the Moon.", "Chapter 7 covers the years 1914 to 1918.",
    "The recipe needs 250 g flour, 2 eggs and 100 ml milk.", "Version control makes collaboration easier.",
    "Der Vertrag läuft bis 2030 und umfasst 12 Standorte.", "Our office moved to the third floor last spring.",
    "Tickets cost 15 euros for adults and 8 for children.", "She scored 21 points in 34 minutes.",
    "The 2020 census counted 331,449,281 people.", "The train leaves from platform 9 at quarter past six.",
]
for text in prose:
    add(text)

rng.shuffle(rows)
with OUT.open("w", encoding="utf-8") as fh:
    for row in rows:
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
print(f"{len(rows)} lines, {sum(len(r['pii']) for r in rows)} PII values -> {OUT}")
