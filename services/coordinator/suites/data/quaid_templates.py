"""Templates, fixed facts and query sets for the `quaid-weeks` generator (written for memrig after seed 001's
methodology: categories, placeholder substitution, week-0 edge facts, duplicate and contradiction pairs,
evolution chains; five query sets). Placeholders: {NAME} {FOOD} {TECH} {AMOUNT} {PLACE} {DATE} {WEEK}.
"""

POOLS = {
    "NAME": ["Alex", "Jordan", "Sam", "Priya", "Marco", "Lena", "Chris", "Taylor", "Nina", "Omar"],
    "FOOD": ["pad thai", "ramen", "tacos", "sushi", "lasagna", "pho", "falafel", "green curry", "paella", "dumplings"],
    "TECH": ["Python", "TypeScript", "Rust", "Go", "Kotlin", "Postgres", "Docker", "React"],
    "AMOUNT": ["$20", "$45", "$60", "$75", "$120", "$250", "$300"],
    "PLACE": ["Seattle", "Denver", "Chicago", "Boston", "Lisbon", "Kyoto", "Vancouver", "Santa Fe"],
}

TEMPLATES = {
    "facts": [
        # workplace
        "Had a long code review with {NAME} about the {TECH} service on {DATE}",
        "Shipped the {TECH} migration at work in week {WEEK}",
        "Sprint planning ran over by an hour on {DATE}",
        "{NAME} asked me to mentor the new intern on {TECH}",
        "Fixed a production outage in the {TECH} billing job on {DATE}",
        "Presented the quarterly roadmap to my manager on {DATE}",
        "Pair-programmed with {NAME} on the {TECH} API in week {WEEK}",
        "Wrote the design doc for the new {TECH} search feature",
        "Had a one-on-one with my manager about promotion criteria on {DATE}",
        "Interviewed a candidate for the {TECH} team on {DATE}",
        "Spent the afternoon debugging flaky {TECH} tests",
        "Volunteered to run the team retro in week {WEEK}",
        # health
        "Went for a 35-minute run on {DATE}",
        "Did a yoga class after work on {DATE}",
        "Went to the gym for leg day in week {WEEK}",
        "Swam 20 laps at the community pool on {DATE}",
        "Slept badly on {DATE} and felt tired all day",
        "Had a dentist appointment on {DATE}; no cavities",
        "Went on a hike near {PLACE} on {DATE}",
        "Started taking vitamin D in week {WEEK}",
        "Cycled to work three days in week {WEEK}",
        "Did a 10-minute meditation before bed on {DATE}",
        # finance
        "Paid {AMOUNT} for the electricity bill on {DATE}",
        "Spent {AMOUNT} on groceries in week {WEEK}",
        "Moved {AMOUNT} into the savings account on {DATE}",
        "Got a {AMOUNT} refund from the airline on {DATE}",
        "Paid {AMOUNT} for the car insurance renewal",
        "Bought a new keyboard for {AMOUNT} on {DATE}",
        "Split a {AMOUNT} dinner bill with {NAME} on {DATE}",
        "Cancelled the streaming subscription to save {AMOUNT} a month",
        # travel
        "Booked a flight to {PLACE} for a conference",
        "Took the train to {PLACE} on {DATE}",
        "Renewed my passport in week {WEEK}",
        "Found a cheap hotel in {PLACE} for the spring trip",
        "Planned a weekend road trip to {PLACE}",
        "My flight to {PLACE} was delayed by two hours on {DATE}",
        "Bought travel insurance for the {PLACE} trip",
        "Packed for the {PLACE} trip on {DATE}",
        # media
        "Watched a documentary about octopuses on {DATE}",
        "Finished reading a novel by Ursula K. Le Guin in week {WEEK}",
        "Listened to a podcast about {TECH} performance on {DATE}",
        "Started watching a sci-fi series with {NAME}",
        "Went to see a jazz concert on {DATE}",
        "Read an article about urban gardening on {DATE}",
        "Played a board game night with {NAME} on {DATE}",
        "Watched the basketball game with {NAME} on {DATE}",
        # relationships
        "Had {FOOD} for dinner with {NAME} on {DATE}",
        "Called Mom on {DATE} and talked for an hour",
        "Helped {NAME} move apartments on {DATE}",
        "Went to {NAME}'s birthday party on {DATE}",
        "Had coffee with {NAME} to catch up on {DATE}",
        "Sent a thank-you card to {NAME} in week {WEEK}",
        "Cooked {FOOD} for the family on {DATE}",
        "Video-called my sister Emma on {DATE}",
        # seasonal
        "Shovelled snow off the driveway on {DATE}",
        "Planted tomato seedlings indoors in week {WEEK}",
        "Put up the bird feeder in the garden on {DATE}",
        "Cleaned the gutters on {DATE}",
        "Bought a new winter coat for {AMOUNT}",
        "Went ice skating with {NAME} on {DATE}",
    ],
    "preferences": [
        "Prefer {FOOD} over other lunch options",
        "I like working from the cafe on Fridays",
        "Prefer dark mode in every editor",
        "I prefer morning workouts to evening ones",
        "I'd rather take the train than fly for short trips",
        "Prefer tabs over spaces in {TECH} code",
        "I like my coffee black with no sugar",
        "Prefer paper notebooks for planning the week",
        "I enjoy {FOOD} more than anything else on cold days",
        "I prefer quiet restaurants over busy bars",
        "Prefer async updates over status meetings",
        "I like to read before bed instead of watching TV",
        "Prefer window seats on flights",
        "I prefer hiking trails with lake views",
        "I like to batch errands on Saturday mornings",
        "Prefer {TECH} for side projects",
    ],
    "entities": [
        "{NAME} is my coworker and we work on the {TECH} project together",
        "{NAME} is a friend from my climbing gym",
        "{NAME} is my neighbour and has a golden retriever",
        "{NAME} runs the bakery on the corner near my flat",
        "{NAME} is my mentor from the old job",
        "{NAME} is the landlord of my apartment",
    ],
    "decisions": [
        "Decided to switch to {TECH} for the backend",
        "Decided to save {AMOUNT} every month for the holiday fund",
        "Decided to stop drinking coffee after 2pm",
        "Decided to visit {PLACE} in the summer",
        "Decided to join the {TECH} study group",
        "Decided to cook at home four nights a week",
    ],
}

PER_WEEK = {"fast": {"facts": 36, "preferences": 8, "entities": 1, "decisions": 1},
            "full": {"facts": 60, "preferences": 12, "entities": 2, "decisions": 2}}

EDGE_FACTS = [
    ("Family", "Mom Linda lives in Portland and works as a teacher"),
    ("Family", "Dad is an engineer at Boeing in Seattle"),
    ("Family", "My sister Emma is a nurse in Chicago"),
    ("Family", "My brother Luis studies architecture in Barcelona"),
    ("Friends & Colleagues", "Alex is my coworker and we work on the Python project together"),
    ("Friends & Colleagues", "Rosa is my best friend from university and lives in Denver"),
    ("Friends & Colleagues", "Ben is my manager at Initech"),
    ("Pets", "My cat Biscuit is a ginger tabby who is nine years old"),
    ("Pets", "Our dog Pepper is a border collie who loves frisbee"),
    ("Home", "I live in a two-bedroom flat in Oakland"),
]

# (paraphrase a, paraphrase b)
DUPLICATES = [
    ("Started learning Spanish on Duolingo", "Began studying Spanish with the Duolingo app"),
    ("My favourite coffee shop is Blue Door Coffee", "Blue Door Coffee is the coffee place I like best"),
    ("I have a standing desk at home", "My home office has a standing desk"),
    ("I'm allergic to peanuts", "I have a peanut allergy"),
    ("I keep my passwords in 1Password", "1Password is where I store my passwords"),
    ("I water the plants every Sunday", "Sunday is when I water the houseplants"),
    ("My bike is a blue Trek hybrid", "I ride a blue Trek hybrid bike"),
    ("I take the 7:40 bus to work", "My bus to the office leaves at 7:40"),
]

# (claim, conflicting claim)
CONTRADICTIONS = [
    ("My favourite band is Radiohead", "My favourite band is Fleetwood Mac"),
    ("I go climbing on Tuesdays", "I go climbing on Thursdays"),
    ("My dentist is Dr. Park", "My dentist is Dr. Alvarez"),
    ("I drink oat milk", "I drink almond milk"),
    ("My laptop is a ThinkPad", "My laptop is a MacBook Air"),
    ("My gym is Iron Works", "My gym is Peak Fitness"),
]

# Evolution chains: (key, [(week, fact), ...]) oldest first.
EVOLUTIONS = [
    ("alex_home", [(0, "Alex lives in San Francisco"), (2, "Alex moved to Austin last month")]),
    ("job", [(0, "I work at Initech as a backend developer"), (3, "I started a new job at Globex as a staff engineer")]),
    ("car", [(0, "I drive a 2012 Honda Civic"), (1, "I sold the Civic and bought a Subaru Outback")]),
    ("team_lead", [(0, "Our team lead is Maria"), (2, "Devon took over as our team lead")]),
    ("phone", [(0, "My phone is a Pixel 6"), (3, "I switched to an iPhone 15")]),
    ("rosa_job", [(0, "Rosa works as a barista"), (1, "Rosa got a job as a UX designer at Stripe")]),
]

# Standard recall (60): (query, expected substrings)
STANDARD = [
    ("What exercise did I do?", ["run", "yoga", "gym", "swam", "hike", "cycled"]),
    ("Did I go running?", ["run"]), ("Did I do yoga?", ["yoga"]), ("When did I go swimming?", ["swam"]),
    ("Where did I hike?", ["hike"]), ("How did I sleep?", ["slept"]), ("Did I see the dentist?", ["dentist"]),
    ("What supplements am I taking?", ["vitamin d"]), ("Did I meditate?", ["meditation"]),
    ("Did I cycle to work?", ["cycled"]),
    ("What did I eat for dinner?", ["dinner"]), ("What food did I cook?", ["cooked"]),
    ("What's my favourite lunch?", ["lunch"]), ("What do I like to eat on cold days?", ["cold days"]),
    ("What code reviews did I have?", ["code review"]), ("What did I ship at work?", ["shipped"]),
    ("Was there a production outage?", ["outage"]), ("Who am I mentoring?", ["mentor"]),
    ("Did I present the roadmap?", ["roadmap"]), ("Did I interview anyone?", ["interviewed"]),
    ("Who did I pair-program with?", ["pair-programmed"]), ("What design docs did I write?", ["design doc"]),
    ("What about flaky tests?", ["flaky"]), ("Who runs the retro?", ["retro"]),
    ("How much was the electricity bill?", ["electricity"]), ("How much did I spend on groceries?", ["groceries"]),
    ("Did I put money into savings?", ["savings"]), ("Did I get a refund?", ["refund"]),
    ("How much was the car insurance?", ["car insurance"]), ("Did I buy a keyboard?", ["keyboard"]),
    ("Which subscription did I cancel?", ["subscription"]), ("Where am I flying for the conference?", ["conference"]),
    ("Did I take a train somewhere?", ["train"]), ("Did I renew my passport?", ["passport"]),
    ("Where am I going on a road trip?", ["road trip"]), ("Was a flight delayed?", ["delayed"]),
    ("Did I buy travel insurance?", ["travel insurance"]), ("What documentary did I watch?", ["documentary"]),
    ("What novel did I finish?", ["novel"]), ("What podcast did I listen to?", ["podcast"]),
    ("What series am I watching?", ["series"]), ("Did I go to a concert?", ["concert"]),
    ("Did I have a board game night?", ["board game"]), ("Did I watch basketball?", ["basketball"]),
    ("When did I call Mom?", ["called mom"]), ("Whose move did I help with?", ["move apartments"]),
    ("Whose birthday party did I go to?", ["birthday"]), ("Who did I have coffee with?", ["coffee with"]),
    ("Did I video-call my sister?", ["video-called"]), ("Did I shovel snow?", ["snow"]),
    ("What did I plant?", ["tomato"]), ("Did I set up a bird feeder?", ["bird feeder"]),
    ("Did I clean the gutters?", ["gutters"]), ("Did I buy a winter coat?", ["winter coat"]),
    ("Did I go ice skating?", ["ice skating"]), ("Do I prefer dark mode?", ["dark mode"]),
    ("How do I take my coffee?", ["black"]), ("Train or plane for short trips?", ["train than fly"]),
    ("What did I decide about the backend?", ["switch to"]), ("What did I decide about coffee?", ["after 2pm"]),
]

# Old memory (20): week-0 edge facts after weeks of noise.
OLD_MEMORY = [
    ("Where does Mom live?", ["Portland", "Linda"]), ("What does my mom do?", ["teacher"]),
    ("Where does Dad work?", ["Boeing"]), ("What is Dad's job?", ["engineer"]),
    ("What does Emma do?", ["nurse"]), ("Where does my sister live?", ["Chicago"]),
    ("What does Luis study?", ["architecture"]), ("Where is my brother?", ["Barcelona"]),
    ("Who do I work with on the Python project?", ["Alex"]), ("Who is Rosa?", ["best friend"]),
    ("Where does Rosa live?", ["Denver"]), ("Who is my manager?", ["Ben"]),
    ("What's my cat's name?", ["Biscuit"]), ("How old is my cat?", ["nine"]),
    ("What breed is Pepper?", ["border collie"]), ("What does my dog love?", ["frisbee"]),
    ("Where do I live?", ["Oakland"]), ("How big is my flat?", ["two-bedroom"]),
    ("What kind of cat is Biscuit?", ["tabby"]), ("What's the dog's name?", ["Pepper"]),
]

# Adversarial (20): (query, expected, tier, type); hard ones may have no expected strings (N/A).
ADVERSARIAL = [
    ("mom linda portland teacher family mother parent home city job", ["Portland"], "easy", "keyword stuffing"),
    ("Where does Linda live?", ["Portland"], "medium", "alias resolution"),
    ("What is my father's employer?", ["Boeing"], "medium", "synonym mismatch"),
    ("Which Alex — the coworker — what project?", ["Python"], "medium", "entity ambiguity"),
    ("What pets do I have and what are their breeds?", ["tabby", "border collie"], "medium", "compound multi-topic"),
    ("What happened last week?", ["week"], "medium", "temporal ambiguity"),
    ("What did I do in January?", ["January"], "medium", "temporal month"),
    ("When did I start at Globex?", ["Globex"], "medium", "temporal start"),
    ("Is Emma older or younger than Luis?", ["Emma", "Luis"], "medium", "comparison"),
    ("Which of my siblings works in healthcare?", ["nurse"], "medium", "synonym mismatch"),
    ("that thing with the furry orange guy", ["Biscuit"], "hard", "colloquial"),
    ("Which family member does NOT live on the west coast?", ["Chicago"], "hard", "negation"),
    ("stuff", [], "hard", "maximally vague"),
    ("What does she do for work?", [], "hard", "pronoun confusion"),
    ("What city does my manager's company's rival employ me in?", [], "hard", "multi-hop entity"),
    ("Where does the person who owns Pepper live?", ["Oakland"], "hard", "multi-hop entity"),
    ("Who at my new workplace is my lead?", ["Devon"], "hard", "multi-hop workplace"),
    ("so, like, remind me what the deal is with my brother's studies?", ["architecture"], "hard", "conversational"),
    ("you know my friend from uni, what's she up to now?", ["Rosa"], "hard", "conversational"),
    ("Is there anything I should remember?", [], "hard", "maximally vague"),
]

# Change detection: current state (6) and change awareness (5): (query, old keywords, new keywords, key)
CURRENT_STATE = [
    ("Where does Alex live now?", ["San Francisco"], ["Austin"], "alex_home"),
    ("Where do I work now?", ["Initech"], ["Globex"], "job"),
    ("What car do I drive now?", ["Civic"], ["Outback"], "car"),
    ("Who is our team lead now?", ["Maria"], ["Devon"], "team_lead"),
    ("What phone do I have now?", ["Pixel"], ["iPhone"], "phone"),
    ("What does Rosa do for work now?", ["barista"], ["UX designer"], "rosa_job"),
]
CHANGE_AWARENESS = [
    ("How has Alex's home changed?", ["San Francisco"], ["Austin"], "alex_home"),
    ("How has my job changed?", ["Initech"], ["Globex"], "job"),
    ("What car did I have before and what now?", ["Civic"], ["Outback"], "car"),
    ("Who led the team before Devon?", ["Maria"], ["Devon"], "team_lead"),
    ("How did Rosa's career change?", ["barista"], ["UX designer"], "rosa_job"),
]

NULL = [
    "What color is my neighbor's roof?", "Did I meet the president?", "What's my blood type?",
    "Have I ever been to Antarctica?", "What is my horse's name?", "Did I win the lottery?",
    "What's my favourite opera?", "Which submarine did I command?", "What is my grandmother's maiden name?",
    "Did I learn to play the bagpipes?",
]
