package bench

// words are common English words, most frequent first; the generator draws
// them with a Zipf distribution so that prose has a realistic word frequency.
var words = splitWords(`the of and to a in that it was he i his you for had is with she as on her at by
not be this but from they which have or all one were we my him an so said there their are no would been
what when if who will more up out them into then could some only time about do like me little man now
very over did can its upon any your great than before other after well old our down see made should
know good two such come day much way never first long eyes might must back through again went those
own still where being these how thought away life here us even without ever house most tom many say
came just head face while because night hand last once yet place nothing think every found under hands
left room took men same whole something both new another mind felt thing young seemed look asked against
among round heard always full having side told why began moment less turned door love began morning
three though father mother got put get until years give world home light looked going voice done whom
each better half far find heart few part seen towards take right quite small white gave lay almost
large along word often enough poor almost water air sat set between words just rather boy girl people
since air end keep let light myself sir bed called himself herself open short knew kind stood means
given means present feet sun table window school church river town village street morning evening
letter book paper money work family friend friends dog horse garden road field tree trees sea ship
black red green blue dark deep high low hard soft strong quiet cold warm early late happy sorry glad
data system service request server client value memory time cache key store read write network
speed error message user order product price report page version update release build test change
however therefore perhaps indeed certainly already across behind beyond toward within around above
remember believe understand answered replied cried whispered laughed smiled looked walked followed
carried returned opened closed watched waited wanted needed tried happened seemed appeared became`)

func splitWords(s string) []string {
	var out []string
	seen := map[string]bool{}
	start := -1
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ' ' || s[i] == '\n' {
			if start >= 0 {
				w := s[start:i]
				if !seen[w] {
					seen[w] = true
					out = append(out, w)
				}
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	return out
}

var names = splitWords(`James Mary John Patricia Robert Jennifer Michael Linda William Elizabeth David Barbara Richard Susan
Joseph Jessica Thomas Sarah Charles Karen Christopher Nancy Daniel Lisa Matthew Betty Anthony Margaret Mark Sandra
Donald Ashley Steven Kimberly Paul Emily Andrew Donna Joshua Michelle Kenneth Carol Kevin Amanda Brian Dorothy
George Melissa Timothy Deborah Ronald Stephanie Jason Rebecca Edward Sharon Jeffrey Laura Ryan Cynthia Jacob Amy
Lukas Sofia Mateo Hannah Noah Emma Liam Olivia Yuki Hiro Priya Arjun Chen Wei Fatima Omar Ines Pablo Lucia Anna`)

var surnames = splitWords(`Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez
Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis
Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera
Campbell Mitchell Carter Roberts Mueller Schmidt Schneider Fischer Weber Dubois Martin Bernard Tanaka Suzuki Sato
Kumar Singh Patel Wang Li Zhang Silva Santos Costa Rossi Russo Ferrari Novak Kowalski Jensen Hansen Larsen`)

var cities = splitWords(`Springfield Portland Austin Seattle Denver Boston Chicago Houston Phoenix Atlanta Miami Dallas
London Manchester Berlin Munich Hamburg Paris Lyon Amsterdam Rotterdam Madrid Barcelona Toronto Vancouver Tokyo
Osaka Sydney Melbourne Mumbai Bangalore Lisbon Dublin Vienna Zurich Stockholm Oslo Copenhagen Warsaw Prague`)

var streets = splitWords(`Main Oak Pine Maple Cedar Elm Washington Lake Hill Park Sunset Highland River Church Market
Mill Spring Ridge Forest Meadow Willow Lincoln Jackson Franklin Madison Chestnut Walnut Cherry Valley Broad`)

var emailDomains = splitWords(`gmail.com gmail.com yahoo.com outlook.com hotmail.com icloud.com proton.me example.com
fastmail.com gmx.de web.de orange.fr`)

var tags = splitWords(`premium beta early-adopter newsletter vip b2b trial churn-risk referral partner enterprise
student nonprofit developer designer`)

var productAdjectives = splitWords(`Classic Premium Ultra Compact Wireless Portable Ergonomic Vintage Modern Deluxe Smart
Lightweight Heavy-Duty Waterproof Organic Handmade Eco Slim Pro Essential`)

var materials = splitWords(`Cotton Leather Steel Aluminum Bamboo Wool Ceramic Glass Oak Linen Silicone Carbon Canvas`)

var productNouns = splitWords(`Backpack Headphones Keyboard Mouse Lamp Chair Desk Mug Bottle Jacket Sneakers Watch Wallet
Speaker Charger Notebook Pen Blanket Pillow Kettle Blender Tent Bicycle Helmet Camera Tripod Monitor Router`)

var categories = []string{"Electronics", "Home & Kitchen", "Sports", "Outdoors", "Fashion", "Books", "Toys",
	"Office", "Garden", "Beauty", "Automotive", "Health", "Music", "Pet Supplies"}

var attributeNames = []string{"color", "size", "weight", "warranty", "material", "origin"}

var attributeValues = map[string][]string{
	"color":    {"black", "white", "navy", "red", "forest green", "graphite", "sand", "silver"},
	"size":     {"XS", "S", "M", "L", "XL", "one size", "42 mm", "15 inch"},
	"weight":   {"120 g", "250 g", "480 g", "1.2 kg", "3.5 kg", "800 g"},
	"warranty": {"1 year", "2 years", "limited lifetime", "90 days"},
	"material": {"recycled polyester", "stainless steel", "full-grain leather", "ABS plastic", "merino wool"},
	"origin":   {"Portugal", "Vietnam", "Germany", "China", "USA", "Italy", "Mexico"},
}

var paths = []string{"/", "/api/v2/products", "/api/v2/products/{id}", "/static/js/app.js", "/static/css/main.css",
	"/api/v2/users/{id}", "/api/v2/orders", "/api/v2/cart", "/login", "/search", "/favicon.ico",
	"/api/v2/orders/{id}", "/c/electronics", "/p/{id}", "/checkout", "/api/v2/auth/refresh", "/health",
	"/robots.txt", "/blog/redis-memory-tips", "/api/v2/recommendations", "/sitemap.xml", "/account/settings",
	"/images/banner-spring.webp", "/api/v2/inventory/{id}", "/wp-login.php", "/.env"}

var statuses = []string{"200", "200", "200", "200", "304", "200", "201", "302", "204", "404", "301", "400", "401", "403", "500", "502", "503"}

var hosts = []string{"www.example-shop.com", "www.google.com", "t.co", "www.bing.com", "news.ycombinator.com", "duckduckgo.com"}

var firstOctets = []int{66, 192, 172, 81, 93, 185, 203, 45, 104, 151, 24, 73, 98, 2, 31, 88}

var userAgents = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
	"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
	"curl/8.5.0",
	"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
	"python-requests/2.31.0",
	"Go-http-client/1.1",
	"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
}

var appMessages = []string{
	"request completed", "cache hit", "cache miss, loading from database", "user signed in",
	"payment authorized", "order created", "retrying upstream call", "slow query detected",
	"token refreshed", "email queued", "rate limit exceeded", "connection reset by peer",
	"inventory reserved", "webhook delivered", "failed to parse request body", "session expired",
	"background job finished", "upstream timeout after 3000ms", "search index updated", "invalid coupon code",
}
