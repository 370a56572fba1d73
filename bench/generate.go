package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Generator produces realistic text data deterministically from a seed: JSON
// API documents, web server and application logs, HTML pages and English
// prose. The same seed always gives the same bytes, so that figures measured
// on the built-in corpus can be reproduced on another machine.
//
// A Generator is not safe for concurrent use.
type Generator struct {
	r    *rand.Rand
	zipf *rand.Zipf
	base time.Time
	ids  uint64
}

// NewGenerator returns a Generator whose output is a function of seed alone.
func NewGenerator(seed uint64) *Generator {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &Generator{
		r:    r,
		zipf: rand.NewZipf(r, 1.07, 2, uint64(len(words)-1)),
		base: time.Date(2024, 3, 11, 8, 0, 0, 0, time.UTC),
		ids:  100000 + seed%1000*1000,
	}
}

func (g *Generator) pick(list []string) string { return list[g.r.IntN(len(list))] }

// skewed picks from list with a strong bias to the first entries, as real
// traffic does (a few popular paths, a long tail).
func (g *Generator) skewed(list []string) string {
	i := int(float64(len(list)) * g.r.Float64() * g.r.Float64() * g.r.Float64())
	return list[i]
}

func (g *Generator) word() string { return words[g.zipf.Uint64()] }

func (g *Generator) now() time.Time {
	g.base = g.base.Add(time.Duration(g.r.IntN(4000)) * time.Millisecond)
	return g.base
}

func (g *Generator) id() uint64 {
	g.ids += uint64(1 + g.r.IntN(37))
	return g.ids
}

func (g *Generator) ip() string {
	if g.r.IntN(4) == 0 {
		return fmt.Sprintf("10.%d.%d.%d", g.r.IntN(4), g.r.IntN(256), 1+g.r.IntN(254))
	}
	first := firstOctets[int(float64(len(firstOctets))*g.r.Float64()*g.r.Float64())]
	return fmt.Sprintf("%d.%d.%d.%d", first+g.r.IntN(3), g.r.IntN(256), g.r.IntN(256), 1+g.r.IntN(254))
}

// Sentence returns one English sentence built from a word list drawn with a
// Zipf distribution, so common words dominate as they do in real text.
func (g *Generator) Sentence() string {
	n := 6 + g.r.IntN(18)
	var b strings.Builder
	for i := 0; i < n; i++ {
		w := g.word()
		if i == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteByte(' ')
			if g.r.IntN(40) == 0 {
				w = g.pick(names)
			}
		}
		b.WriteString(w)
		if i > 2 && i < n-2 && g.r.IntN(9) == 0 {
			b.WriteByte(',')
		}
	}
	b.WriteString(g.pick([]string{".", ".", ".", ".", ".", "?", "!", ";"}))
	return b.String()
}

// Paragraph returns 2 to 7 sentences.
func (g *Generator) Paragraph() string {
	n := 2 + g.r.IntN(6)
	s := make([]string, n)
	for i := range s {
		s[i] = g.Sentence()
	}
	return strings.Join(s, " ")
}

// AppendProse appends English prose of at least n bytes (paragraphs separated
// by blank lines, occasional chapter headings).
func (g *Generator) AppendProse(dst []byte, n int) []byte {
	start := len(dst)
	chapter := 1
	for len(dst)-start < n {
		if g.r.IntN(25) == 0 || len(dst) == start {
			dst = fmt.Appendf(dst, "CHAPTER %s\n\n", roman(chapter))
			chapter++
		}
		dst = append(dst, g.Paragraph()...)
		dst = append(dst, "\n\n"...)
	}
	return dst
}

func roman(n int) string {
	vals := []int{50, 40, 10, 9, 5, 4, 1}
	syms := []string{"L", "XL", "X", "IX", "V", "IV", "I"}
	var b strings.Builder
	for i, v := range vals {
		for n >= v {
			b.WriteString(syms[i])
			n -= v
		}
	}
	return b.String()
}

// AppendLogs appends web server access log lines (nginx "combined" format)
// mixed with structured application log lines, at least n bytes in all.
func (g *Generator) AppendLogs(dst []byte, n int) []byte {
	start := len(dst)
	for len(dst)-start < n {
		t := g.now()
		if g.r.IntN(3) == 0 {
			dst = g.appendAppLog(dst, t)
			continue
		}
		method := g.skewed([]string{"GET", "GET", "GET", "POST", "GET", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"})
		path := g.skewed(paths)
		path = strings.ReplaceAll(path, "{id}", strconv.FormatUint(g.id()%50000, 10))
		if g.r.IntN(4) == 0 {
			path += "?page=" + strconv.Itoa(1+g.r.IntN(40)) + "&per_page=" + g.pick([]string{"20", "50", "100"})
		}
		status := g.skewed(statuses)
		size := 0
		if status != "304" && status != "204" {
			size = 200 + g.r.IntN(40000)
		}
		ref := "-"
		if g.r.IntN(3) == 0 {
			ref = "https://" + g.pick(hosts) + g.skewed(paths)
			ref = strings.ReplaceAll(ref, "{id}", strconv.Itoa(g.r.IntN(9000)))
		}
		lat := 0.001 + g.r.ExpFloat64()*0.045
		dst = fmt.Appendf(dst, "%s - - [%s] \"%s %s HTTP/1.1\" %s %d \"%s\" \"%s\" rt=%.3f uct=\"0.000\" uht=\"%.3f\" urt=\"%.3f\"\n",
			g.ip(), t.Format("02/Jan/2006:15:04:05 -0700"), method, path, status, size, ref, g.skewed(userAgents), lat, lat*0.9, lat*0.95)
	}
	return dst
}

func (g *Generator) appendAppLog(dst []byte, t time.Time) []byte {
	level := g.skewed([]string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "INFO", "ERROR"})
	svc := g.pick([]string{"api", "billing", "auth", "search", "worker", "notifier"})
	switch g.r.IntN(4) {
	case 0:
		return fmt.Appendf(dst, "%s level=%s service=%s msg=%q user_id=%d duration_ms=%d trace_id=%016x\n",
			t.Format(time.RFC3339Nano), level, svc, g.skewed(appMessages), g.id()%90000, g.r.IntN(900), g.r.Uint64())
	case 1:
		return fmt.Appendf(dst, "{\"time\":%q,\"level\":%q,\"service\":%q,\"msg\":%q,\"request_id\":\"%08x-%04x\",\"status\":%s,\"latency_ms\":%.2f}\n",
			t.Format(time.RFC3339Nano), strings.ToLower(level), svc, g.skewed(appMessages), g.r.Uint32(), g.r.IntN(65536), g.skewed(statuses), g.r.ExpFloat64()*35)
	default:
		return fmt.Appendf(dst, "%s [%s] %s[%d]: %s (order=%d, attempt=%d)\n",
			t.Format("2006-01-02 15:04:05.000"), level, svc, 1000+g.r.IntN(30000), g.skewed(appMessages), g.id(), 1+g.r.IntN(3))
	}
}

// JSON API document types. Field order follows the struct, so output is
// deterministic.
type (
	address struct {
		Street  string `json:"street"`
		City    string `json:"city"`
		Zip     string `json:"zip"`
		Country string `json:"country"`
	}
	user struct {
		ID        uint64            `json:"id"`
		Username  string            `json:"username"`
		Name      string            `json:"name"`
		Email     string            `json:"email"`
		Verified  bool              `json:"verified"`
		Role      string            `json:"role"`
		CreatedAt string            `json:"created_at"`
		LastLogin *string           `json:"last_login"`
		Address   address           `json:"address"`
		Tags      []string          `json:"tags"`
		Bio       string            `json:"bio,omitempty"`
		Settings  map[string]string `json:"settings"`
		AvatarURL string            `json:"avatar_url"`
		Plan      string            `json:"plan"`
		Notify    struct {
			Email bool `json:"email"`
			SMS   bool `json:"sms"`
			Push  bool `json:"push"`
		} `json:"notifications"`
		Links map[string]string `json:"_links"`
		Stats struct {
			Followers int `json:"followers"`
			Following int `json:"following"`
			Posts     int `json:"posts"`
		} `json:"stats"`
	}
	lineItem struct {
		SKU       string  `json:"sku"`
		Name      string  `json:"name"`
		Quantity  int     `json:"quantity"`
		UnitPrice float64 `json:"unit_price"`
		Currency  string  `json:"currency"`
	}
	order struct {
		ID         uint64     `json:"id"`
		Number     string     `json:"number"`
		CustomerID uint64     `json:"customer_id"`
		Status     string     `json:"status"`
		CreatedAt  string     `json:"created_at"`
		UpdatedAt  string     `json:"updated_at"`
		Items      []lineItem `json:"items"`
		Total      float64    `json:"total"`
		Shipping   address    `json:"shipping_address"`
		Payment    struct {
			Method string `json:"method"`
			Last4  string `json:"last4,omitempty"`
			Paid   bool   `json:"paid"`
		} `json:"payment"`
		Notes   *string `json:"notes"`
		History []struct {
			Status string `json:"status"`
			At     string `json:"at"`
		} `json:"status_history"`
		Links map[string]string `json:"_links"`
	}
	product struct {
		ID          uint64   `json:"id"`
		SKU         string   `json:"sku"`
		Title       string   `json:"title"`
		Description string   `json:"description"`
		Category    string   `json:"category"`
		Price       float64  `json:"price"`
		Currency    string   `json:"currency"`
		InStock     bool     `json:"in_stock"`
		Inventory   int      `json:"inventory"`
		Rating      float64  `json:"rating"`
		Reviews     int      `json:"review_count"`
		Images      []string `json:"images"`
		Attributes  []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"attributes"`
		UpdatedAt string `json:"updated_at"`
		Shipping  struct {
			Free        bool   `json:"free"`
			EstimateMin int    `json:"estimate_days_min"`
			EstimateMax int    `json:"estimate_days_max"`
			Warehouse   string `json:"warehouse"`
		} `json:"shipping"`
		Links map[string]string `json:"_links"`
	}
)

func (g *Generator) address() address {
	return address{
		Street:  fmt.Sprintf("%d %s %s", 1+g.r.IntN(2500), g.pick(streets), g.pick([]string{"St", "Ave", "Rd", "Blvd", "Lane", "Way"})),
		City:    g.skewed(cities),
		Zip:     fmt.Sprintf("%05d", g.r.IntN(99999)),
		Country: g.skewed([]string{"US", "US", "GB", "DE", "FR", "CA", "NL", "JP", "BR", "IN", "AU", "ES"}),
	}
}

func (g *Generator) user() user {
	first, last := g.pick(names), g.pick(surnames)
	u := user{
		ID:        g.id(),
		Username:  strings.ToLower(first[:1]+last) + strconv.Itoa(g.r.IntN(1000)),
		Name:      first + " " + last,
		Verified:  g.r.IntN(3) > 0,
		Role:      g.skewed([]string{"member", "member", "member", "admin", "editor", "viewer", "owner"}),
		CreatedAt: g.now().Add(-time.Duration(g.r.IntN(3*365*24)) * time.Hour).Format(time.RFC3339),
		Address:   g.address(),
		Settings: map[string]string{
			"theme":    g.pick([]string{"light", "dark", "system"}),
			"language": g.skewed([]string{"en-US", "en-GB", "de-DE", "fr-FR", "es-ES", "ja-JP", "pt-BR"}),
			"timezone": g.skewed([]string{"America/New_York", "Europe/London", "Europe/Berlin", "America/Los_Angeles", "Asia/Tokyo"}),
		},
	}
	u.Email = strings.ToLower(first+"."+last) + "@" + g.skewed(emailDomains)
	u.AvatarURL = fmt.Sprintf("https://cdn.example-shop.com/avatars/%d/%s.png", u.ID%1000, u.Username)
	u.Plan = g.skewed([]string{"free", "free", "free", "pro", "team", "enterprise"})
	u.Notify.Email, u.Notify.SMS, u.Notify.Push = g.r.IntN(5) > 0, g.r.IntN(5) == 0, g.r.IntN(2) == 0
	u.Links = map[string]string{
		"self":   fmt.Sprintf("/api/v2/users/%d", u.ID),
		"orders": fmt.Sprintf("/api/v2/users/%d/orders", u.ID),
	}
	if g.r.IntN(5) > 0 {
		s := g.now().Format(time.RFC3339)
		u.LastLogin = &s
	}
	for i := g.r.IntN(4); i > 0; i-- {
		u.Tags = append(u.Tags, g.skewed(tags))
	}
	if u.Tags == nil {
		u.Tags = []string{}
	}
	if g.r.IntN(2) == 0 {
		u.Bio = g.Sentence()
	}
	u.Stats.Followers = int(g.r.ExpFloat64() * 300)
	u.Stats.Following = int(g.r.ExpFloat64() * 150)
	u.Stats.Posts = int(g.r.ExpFloat64() * 80)
	return u
}

func (g *Generator) price() float64 {
	return float64(int((2+g.r.ExpFloat64()*60)*100)-1) / 100
}

func (g *Generator) product() product {
	p := product{
		ID:        g.id(),
		SKU:       fmt.Sprintf("%s-%05d", strings.ToUpper(g.pick(productNouns)[:3]), g.r.IntN(100000)),
		Title:     g.pick(productAdjectives) + " " + g.pick(materials) + " " + g.pick(productNouns),
		Category:  g.skewed(categories),
		Price:     g.price(),
		Currency:  g.skewed([]string{"USD", "USD", "EUR", "GBP"}),
		Inventory: g.r.IntN(500),
		Rating:    float64(25+g.r.IntN(26)) / 10,
		Reviews:   int(g.r.ExpFloat64() * 120),
		UpdatedAt: g.now().Format(time.RFC3339),
	}
	p.InStock = p.Inventory > 0
	p.Shipping.Free = p.Price > 35
	p.Shipping.EstimateMin = 1 + g.r.IntN(3)
	p.Shipping.EstimateMax = p.Shipping.EstimateMin + 2 + g.r.IntN(3)
	p.Shipping.Warehouse = g.skewed([]string{"us-east-1", "us-east-1", "us-west-2", "eu-central-1"})
	p.Links = map[string]string{
		"self":    fmt.Sprintf("/api/v2/products/%d", p.ID),
		"reviews": fmt.Sprintf("/api/v2/products/%d/reviews", p.ID),
	}
	p.Description = g.Sentence() + " " + g.Sentence()
	for i := 1 + g.r.IntN(3); i > 0; i-- {
		p.Images = append(p.Images, fmt.Sprintf("https://cdn.example-shop.com/img/%s/%d_%d.jpg", strings.ToLower(p.SKU), p.ID, i))
	}
	for i := 1 + g.r.IntN(4); i > 0; i-- {
		k := g.pick(attributeNames)
		p.Attributes = append(p.Attributes, struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		}{k, g.pick(attributeValues[k])})
	}
	return p
}

func (g *Generator) order() order {
	o := order{
		ID:         g.id(),
		CustomerID: g.id() % 90000,
		Status:     g.skewed([]string{"delivered", "shipped", "paid", "pending", "cancelled", "refunded"}),
		Shipping:   g.address(),
	}
	o.Number = fmt.Sprintf("SO-%d-%06d", 2024, o.ID%1000000)
	created := g.now()
	o.CreatedAt = created.Format(time.RFC3339)
	o.UpdatedAt = created.Add(time.Duration(g.r.IntN(72*60)) * time.Minute).Format(time.RFC3339)
	for i := 1 + int(g.r.ExpFloat64()*2); i > 0; i-- {
		p := g.pick(productNouns)
		it := lineItem{
			SKU:       fmt.Sprintf("%s-%05d", strings.ToUpper(p[:3]), g.r.IntN(100000)),
			Name:      g.pick(productAdjectives) + " " + p,
			Quantity:  1 + int(g.r.ExpFloat64()),
			UnitPrice: g.price(),
			Currency:  "USD",
		}
		o.Items = append(o.Items, it)
		o.Total += float64(it.Quantity) * it.UnitPrice
	}
	o.Total = float64(int(o.Total*100)) / 100
	o.Payment.Method = g.skewed([]string{"card", "card", "paypal", "bank_transfer", "gift_card"})
	if o.Payment.Method == "card" {
		o.Payment.Last4 = fmt.Sprintf("%04d", g.r.IntN(10000))
	}
	o.Payment.Paid = o.Status != "pending"
	at := created
	for _, st := range []string{"pending", "paid", "shipped", "delivered"} {
		o.History = append(o.History, struct {
			Status string `json:"status"`
			At     string `json:"at"`
		}{st, at.Format(time.RFC3339)})
		if st == o.Status {
			break
		}
		at = at.Add(time.Duration(30+g.r.IntN(3000)) * time.Minute)
	}
	o.Links = map[string]string{
		"self":     fmt.Sprintf("/api/v2/orders/%d", o.ID),
		"customer": fmt.Sprintf("/api/v2/users/%d", o.CustomerID),
		"invoice":  fmt.Sprintf("/api/v2/orders/%d/invoice.pdf", o.ID),
	}
	if g.r.IntN(6) == 0 {
		n := g.Sentence()
		o.Notes = &n
	}
	return o
}

// AppendJSON appends one JSON API response document of at least n bytes
// (when n > 0): a paginated list of users, orders or products with nested
// objects, chosen by the generator, wrapped in a {"data":[...],"meta":{...}}
// envelope. The result is always valid JSON.
func (g *Generator) AppendJSON(dst []byte, n int) []byte {
	return g.appendJSONKind(dst, n, 0, g.r.IntN(3))
}

// appendJSONKind appends a document of kind (0 users, 1 orders, 2 products)
// with records until it is at least min bytes long, but never longer than max
// bytes when max > 0 (then it may hold no record at all).
func (g *Generator) appendJSONKind(dst []byte, min, max, kind int) []byte {
	resource := [...]string{"users", "orders", "products"}[kind]
	page := 1 + g.r.IntN(20)
	perPage := 20 + g.r.IntN(80)
	meta := fmt.Sprintf(`],"meta":{"resource":%q,"page":%d,"per_page":%d,"total":%d,"request_id":"%08x-%04x-%04x","generated_at":%q},"links":{"self":"/api/v2/%s?page=%d","next":"/api/v2/%s?page=%d"}}`,
		resource, page, perPage, perPage*(20+g.r.IntN(200)), g.r.Uint32(), g.r.IntN(65536), g.r.IntN(65536),
		g.now().Format(time.RFC3339), resource, page, resource, page+1)
	var buf bytes.Buffer
	buf.WriteString(`{"data":[`)
	for count := 0; buf.Len()+len(meta) < min; count++ {
		var v any
		switch kind {
		case 0:
			v = g.user()
		case 1:
			v = g.order()
		default:
			v = g.product()
		}
		b, err := json.Marshal(v)
		if err != nil {
			panic("BUG: marshal generated document: " + err.Error())
		}
		if max > 0 && buf.Len()+len(b)+1+len(meta) > max {
			break
		}
		if count > 0 {
			buf.WriteByte(',')
		}
		buf.Write(b)
	}
	buf.WriteString(meta)
	return append(dst, buf.Bytes()...)
}

// AppendHTML appends an HTML page of at least n bytes: a product listing or
// article page with navigation, repeated markup and prose.
func (g *Generator) AppendHTML(dst []byte, n int) []byte {
	start := len(dst)
	title := strings.Title(g.word() + " " + g.pick(productNouns) + " " + g.word()) //nolint:staticcheck // ASCII words only
	dst = fmt.Appendf(dst, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%s | Example Shop</title>
<link rel="stylesheet" href="/static/css/main.%08x.css">
<script defer src="/static/js/app.%08x.js"></script>
</head>
<body class="page page-%s">
<header class="site-header"><nav class="navbar"><ul class="nav-list">
`, title, g.r.Uint32(), g.r.Uint32(), g.pick(categories))
	for _, c := range categories[:8] {
		dst = fmt.Appendf(dst, "<li class=\"nav-item\"><a class=\"nav-link\" href=\"/c/%s\">%s</a></li>\n", strings.ToLower(strings.ReplaceAll(c, " ", "-")), c)
	}
	dst = append(dst, "</ul></nav></header>\n<main class=\"container\">\n"...)
	for len(dst)-start < n {
		if g.r.IntN(2) == 0 {
			p := g.product()
			dst = fmt.Appendf(dst, `<div class="product-card" data-id="%d" data-sku="%s">
  <a href="/p/%d"><img class="product-image" src="%s" alt="%s" loading="lazy" width="320" height="320"></a>
  <div class="product-info"><h3 class="product-title"><a href="/p/%d">%s</a></h3>
  <span class="price">%.2f %s</span> <span class="rating" title="%.1f out of 5">%.1f (%d reviews)</span>
  <p class="product-description">%s</p>
  <button class="btn btn-primary add-to-cart" data-id="%d">Add to cart</button></div>
</div>
`, p.ID, p.SKU, p.ID, p.Images[0], p.Title, p.ID, p.Title, p.Price, p.Currency, p.Rating, p.Rating, p.Reviews, p.Description, p.ID)
		} else {
			dst = fmt.Appendf(dst, "<section class=\"article-section\">\n<h2>%s</h2>\n<p>%s</p>\n<p>%s <a href=\"/blog/%s-%d\">%s</a>.</p>\n</section>\n",
				strings.TrimRight(g.Sentence(), ".?!;"), g.Paragraph(), g.Sentence(), g.word(), g.r.IntN(900), g.word()+" "+g.word())
		}
	}
	dst = fmt.Appendf(dst, "</main>\n<footer class=\"site-footer\"><p>&copy; 2024 Example Shop Inc. All rights reserved.</p><p><a href=\"/privacy\">Privacy</a> · <a href=\"/terms\">Terms</a></p></footer>\n</body>\n</html>\n")
	return dst
}

// Kind names one family of generated data.
type Kind string

// The kinds of generated data.
const (
	KindJSON  Kind = "json"
	KindLogs  Kind = "logs"
	KindHTML  Kind = "html"
	KindProse Kind = "prose"
)

// Kinds lists every kind of generated data, in corpus order.
var Kinds = []Kind{KindJSON, KindLogs, KindHTML, KindProse}

// Append appends generated data of the given kind, at least n bytes long.
func (g *Generator) Append(dst []byte, k Kind, n int) []byte {
	switch k {
	case KindJSON:
		return g.AppendJSON(dst, n)
	case KindLogs:
		return g.AppendLogs(dst, n)
	case KindHTML:
		return g.AppendHTML(dst, n)
	default:
		return g.AppendProse(dst, n)
	}
}

// JSONDocument returns a JSON API document of exactly size bytes (size 0
// gives an empty value), deterministic in seed and size. The document is
// valid JSON whenever size is at least 64 bytes: generated records are
// followed by a "padding" string field of plain words to reach the size.
func JSONDocument(seed uint64, size int) []byte {
	if size <= 0 {
		return []byte{}
	}
	g := NewGenerator(seed)
	if size < 64 {
		return g.AppendProse(nil, size)[:size]
	}
	// Generate a document a little smaller than size, then close it with a
	// padding field that brings it to the exact size.
	doc := g.appendJSONKind(nil, size-300, size-24, int(seed%3))
	if len(doc) > size-24 { // size too small for the envelope
		doc = []byte(`{"data":[]}`)
	}
	doc = doc[:len(doc)-1] // drop the closing brace
	doc = append(doc, `,"padding":"`...)
	need := size - len(doc) - 2
	pad := g.AppendProse(nil, need)
	for i, c := range pad {
		if c == '\n' || c == '"' || c == '\\' {
			pad[i] = ' '
		}
	}
	doc = append(doc, pad[:need]...)
	doc = append(doc, `"}`...)
	return doc
}
