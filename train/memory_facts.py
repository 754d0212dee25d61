"""Facts and questions for the memory task: varied values, statements and paraphrased questions.

A fact is (entity, attribute, value). It is *stated* once with one template (the sentence that
ends up in an episode of the store) and *asked* later with another template, usually with other
words for the attribute and another word order, inside one of several question scaffolds.

Two disjoint pools are made from the same lists: `split="train"` and `split="eval"` use
different statement templates, question templates, first names and surnames, so evaluation
measures facts phrased unlike anything seen in training.  bench/memory_e2e_bench.py has its own
generator with templates of its own; nothing here is shared with it.
"""
import random

FIRST = """Alice Bruno Chloe Dmitri Elena Farid Grace Hugo Ines Jonas Keiko Liam Maya Nikolai Olga
Pedro Quinn Rosa Samir Tara Ulrich Vera Walter Xenia Yusuf Zoe Arthur Beatrice Carlos Dora Emil
Fatima Gustav Hanna Ivan Julia Kofi Lena Marco Nadia Oscar Priya Rafael Sofia Tomas Uma Victor
Wanda Yara Zane Amara Bianca Cyrus Daria Esteban Freya Gideon Helga Idris Jasmine Kenji Lucia
Mateo Noor Otto Paloma Rohan Selma Teodor Ursula Vikram Willa Ximena Yannick Zofia Anders Brigid
Cosmo Delphine Ezra Flora Goran Hiroshi Ilse Jorge Katya Lorenzo Mirela Nils Odette Pavel
Rasmus Saoirse Tobias Valeria Wendell""".split()
LAST = """Abbott Baker Castillo Dunn Ellis Fischer Garcia Hale Iverson Jensen Kowalski Lambert
Moreau Novak Okafor Price Quint Reyes Schmidt Tanaka Underwood Vance Weber Young Zimmer Almeida
Brennan Costa Dubois Eriksen Ferreira Grant Horvath Ibarra Jovanovic Keller Lindqvist Mendez
Nakamura Oduya Petrov Ramos Sato Takahashi Ueda Vasquez Walsh Xu Yilmaz Zhang Andersen Bauer
Chen Delgado Engel Fontaine Gallo Haddad Ishikawa Jaworski Kim Laurent Marsh Nguyen Olsen
Pereira Quinlan Rossi Santos Thorne Varga Whitfield Yamada Zielinski Arslan Bianchi Caruso
Dimitrov Esposito Falk Gruber Holm Iqbal Janssen Kaur Lund Mbeki Nowak Ortega Pohl Ruiz
Sorensen Toivonen Vogel Wolff""".split()
ADJ = "red blue green silver old north small quiet east wooden golden broken upper hidden western narrow".split()
NOUN = ("door garden tower warehouse library cabinet harbor bridge station workshop vault office cellar "
        "lighthouse barn gallery project laboratory committee ship").split()
CITY = """Lisbon Oslo Nairobi Lima Osaka Krakow Dublin Porto Quito Hanoi Tunis Seville Bergen Graz
Leeds Perth Kyoto Lyon Turin Gdansk Riga Tallinn Bilbao Split Malaga Geneva Ghent Aarhus
Tampere Cork Salzburg Verona Bologna Utrecht Brno Plovdiv Tbilisi Izmir Fez Accra Dakar Cusco
Recife Cordoba Rosario Halifax Quebec Denver Boise Austin Tucson Dayton Mobile Fresno Omaha""".split()
MONTH = "January February March April May June July August September October November December".split()
COLOR = "amber crimson teal violet olive maroon indigo ivory coral navy scarlet bronze".split()
ANIMAL = "otter falcon badger lynx heron walrus gecko bison raven marmot ibis tapir".split()
LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"

# attribute -> (value kind, words used when it is stated, other words used when it is asked)
ATTRS = {
    "badge number": ("num", ["badge number"], ["badge number", "badge", "ID badge number"]),
    "parking space": ("num", ["parking space"], ["parking spot", "parking space number", "parking space"]),
    "pin code": ("num", ["pin code", "PIN"], ["PIN", "pin number", "pin code"]),
    "cabin number": ("num", ["cabin number"], ["cabin", "cabin number"]),
    "locker number": ("num", ["locker number"], ["locker", "locker number"]),
    "room number": ("num", ["room number"], ["room", "room number"]),
    "phone extension": ("num", ["phone extension"], ["extension", "phone extension", "extension number"]),
    "ticket number": ("num", ["ticket number"], ["ticket number", "ticket"]),
    "account number": ("num", ["account number"], ["account number", "account"]),
    "seat number": ("num", ["seat number"], ["seat", "seat number"]),
    "employee number": ("num", ["employee number", "staff number"], ["employee ID", "staff number", "employee number"]),
    "access code": ("code", ["access code"], ["access code", "entry code", "door code"]),
    "booking reference": ("code", ["booking reference"], ["booking code", "reservation code", "booking reference"]),
    "license plate": ("code", ["license plate"], ["number plate", "plate number", "license plate"]),
    "wifi password": ("code", ["wifi password"], ["wireless password", "wifi password", "network password"]),
    "serial code": ("code", ["serial code"], ["serial number", "serial code"]),
    "birthday": ("date", ["birthday"], ["date of birth", "birthday", "birth date"]),
    "appointment": ("date", ["appointment", "appointment date"], ["appointment date", "appointment"]),
    "delivery date": ("date", ["delivery date"], ["delivery date", "delivery day"]),
    "deadline": ("date", ["deadline"], ["due date", "deadline"]),
    "hometown": ("city", ["hometown"], ["home town", "hometown", "city of origin"]),
    "destination": ("city", ["destination"], ["travel destination", "destination city", "destination"]),
    "office location": ("city", ["office location", "office city"], ["office city", "office location"]),
    "birthplace": ("city", ["birthplace", "place of birth"], ["place of birth", "birthplace", "city of birth"]),
    "manager": ("name", ["manager"], ["boss", "manager", "supervisor"]),
    "doctor": ("name", ["doctor"], ["physician", "doctor"]),
    "landlord": ("name", ["landlord"], ["landlord", "landlady or landlord"]),
    "emergency contact": ("name", ["emergency contact"], ["emergency contact", "contact in case of emergency"]),
    "favourite colour": ("color", ["favourite colour", "favorite color"], ["favourite colour", "preferred colour", "favorite color"]),
    "code word": ("animal", ["code word", "password word"], ["code word", "secret word", "password word"]),
    "pet's name": ("name1", ["pet's name"], ["pet's name", "pet", "pet name"]),
}

# Statements: {e} entity, {a} attribute words, {v} value.  Split into train / eval templates.
STATEMENTS = [
    "Remember this: the {a} of {e} is {v}.",
    "The {a} of {e} is {v}.",
    "{e}'s {a} is {v}.",
    "Note that the {a} of {e} is {v}.",
    "For the record, the {a} for {e} is {v}.",
    "Log entry: the {a} for {e} was set to {v}.",
    "We recorded {v} as the {a} of {e}.",
    "{v} is the {a} of {e}.",
    "According to the file, {e}'s {a} is {v}.",
    "Update: {e} changed the {a} to {v}.",
    "The {a} for {e}: {v}.",
    "In case you need it later, the {a} of {e} is {v}.",
    "{e} mentioned that the {a} is {v}.",
    "It was confirmed today that {e} has {v} as the {a}.",
    "Important: {e} now uses {v} as the {a}.",
    "From the records: {a} of {e} = {v}.",
    # eval-only below this line
    "{e} told us that the {a} is {v}.",
    "After the meeting, {e} said the {a} would be {v}.",
    "Please keep in mind: {v} is what {e} gave as the {a}.",
    "Memo to all staff: the {a} belonging to {e} is {v}.",
]
N_TRAIN_STATEMENTS = 16

QUESTIONS = [
    "What is the {a} of {e}?",
    "What is {e}'s {a}?",
    "Which {a} does {e} have?",
    "Do you remember the {a} of {e}?",
    "Tell me {e}'s {a}.",
    "What {a} was recorded for {e}?",
    "Can you recall {e}'s {a}?",
    "I forgot the {a} of {e}. What is it?",
    "Remind me: what is the {a} for {e}?",
    "What was the {a} that {e} mentioned?",
    "{e} has a {a}. What is it?",
    "Look up the {a} of {e}, please.",
    # eval-only below this line
    "What did {e} say the {a} was?",
    "{e}'s {a}, what was it again?",
    "Which {a} belongs to {e}?",
    "Could you tell me what {a} {e} has?",
]
N_TRAIN_QUESTIONS = 12

# (prefix, suffix) around the question; the answer follows the suffix.
SCAFFOLDS = [("Question: ", "\nAnswer:"), ("Q: ", "\nA:"), ("User: ", "\nAssistant:"), ("", "\n")]


def _value(kind, rng):
    if kind == "num":
        nd = rng.randint(3, 6)
        return str(rng.randrange(10 ** (nd - 1), 10 ** nd))
    if kind == "code":
        n = rng.randint(2, 3)
        s = "".join(rng.choice(LETTERS) for _ in range(n)) + "-" + str(rng.randrange(10, 10000))
        return s
    if kind == "date":
        return "%s %d" % (rng.choice(MONTH), rng.randint(1, 28))
    if kind == "city":
        return rng.choice(CITY)
    if kind == "name":
        return "%s %s" % (rng.choice(FIRST), rng.choice(LAST))
    if kind == "name1":
        return rng.choice(FIRST)
    if kind == "color":
        return rng.choice(COLOR)
    if kind == "animal":
        return rng.choice(ANIMAL)
    raise ValueError(kind)


class FactMaker:
    """Makes facts of one split.  The eval split's names come from the last fifth of the name
    lists, the train split's from the rest, so no eval entity is seen in training."""

    def __init__(self, split, seed):
        assert split in ("train", "eval")
        self.rng = random.Random(seed)
        cut_f, cut_l = len(FIRST) * 4 // 5, len(LAST) * 4 // 5
        if split == "train":
            self.first, self.last = FIRST[:cut_f], LAST[:cut_l]
            self.stmts, self.qs = STATEMENTS[:N_TRAIN_STATEMENTS], QUESTIONS[:N_TRAIN_QUESTIONS]
        else:
            self.first, self.last = FIRST[cut_f:], LAST[cut_l:]
            self.stmts, self.qs = STATEMENTS[N_TRAIN_STATEMENTS:], QUESTIONS[N_TRAIN_QUESTIONS:]

    def entity(self):
        r = self.rng
        if r.random() < 0.8:
            return "%s %s" % (r.choice(self.first), r.choice(self.last))
        return "the %s %s" % (r.choice(ADJ), r.choice(NOUN))

    def make(self):
        """-> dict(statement, question, answer, entity, attribute, value)."""
        r = self.rng
        attr = r.choice(sorted(ATTRS))
        kind, say_words, ask_words = ATTRS[attr]
        e, v = self.entity(), _value(kind, r)
        stmt = r.choice(self.stmts).format(e=e, a=r.choice(say_words), v=v)
        q = r.choice(self.qs).format(e=e, a=r.choice(ask_words))
        q = q[0].upper() + q[1:]
        stmt = stmt[0].upper() + stmt[1:]
        pre, suf = SCAFFOLDS[0] if r.random() < 0.55 else r.choice(SCAFFOLDS)
        return dict(statement=stmt, question=pre + q + suf, answer=" " + v + ".", entity=e,
                    attribute=attr, value=v)



# ------------------------------------------------------------------ the training split's extras
# Training sees far more variety than the evaluation split's fixed lists: made-up names (so that
# matching an entity is a matter of its tokens, not of names learnt by heart), attributes and value
# forms the evaluation never uses, and statements and questions put together from parts.  The
# evaluation split (FactMaker("eval")) is exactly what it was, so results stay comparable.
EXTRA_ATTRS = {
    "gate number": ("num", ["gate number", "gate"], ["boarding gate", "gate number", "gate"]),
    "apartment number": ("num", ["apartment number", "flat number"], ["flat", "apartment", "apartment number"]),
    "order number": ("num", ["order number"], ["order", "order ID", "order number"]),
    "invoice number": ("num", ["invoice number"], ["invoice", "bill number", "invoice number"]),
    "membership number": ("num", ["membership number"], ["member number", "membership ID", "membership number"]),
    "bus route": ("small", ["bus route", "bus line"], ["bus", "bus number", "bus line"]),
    "table number": ("small", ["table number"], ["table", "table number"]),
    "platform": ("small", ["platform"], ["train platform", "platform number"]),
    "shoe size": ("small", ["shoe size"], ["size of shoe", "shoe size"]),
    "safe combination": ("num", ["safe combination"], ["code of the safe", "safe code", "combination"]),
    "customer number": ("num", ["customer number"], ["client number", "customer ID", "customer number"]),
    "flight number": ("code", ["flight number", "flight"], ["flight", "flight code"]),
    "tracking number": ("code", ["tracking number"], ["parcel tracking code", "tracking code", "shipment number"]),
    "postcode": ("code", ["postcode", "postal code"], ["zip code", "post code", "postal code"]),
    "project code": ("code", ["project code"], ["project ID", "project number", "project code"]),
    "voucher code": ("code", ["voucher code", "coupon code"], ["discount code", "promo code", "voucher"]),
    "blood type": ("blood", ["blood type", "blood group"], ["blood group", "blood type"]),
    "email address": ("email", ["email address", "e-mail"], ["email", "mail address", "e-mail address"]),
    "meeting time": ("time", ["meeting time"], ["time of the meeting", "meeting time"]),
    "alarm time": ("time", ["alarm time", "wake-up time"], ["alarm", "wake-up alarm", "alarm time"]),
    "start date": ("date", ["start date", "first day"], ["starting date", "first working day", "start date"]),
    "anniversary": ("date", ["anniversary"], ["wedding anniversary", "anniversary date"]),
    "exam date": ("date", ["exam date"], ["test date", "examination day", "exam"]),
    "departure date": ("date", ["departure date"], ["leaving date", "day of departure", "departure"]),
    "renewal date": ("date", ["renewal date"], ["expiry date", "renewal", "date of renewal"]),
    "favourite city": ("city", ["favourite city", "favorite city"], ["preferred city", "favourite place"]),
    "home base": ("city", ["home base", "base city"], ["base", "base of operations"]),
    "conference city": ("city", ["conference city", "conference location"], ["city of the conference", "conference venue"]),
    "holiday destination": ("city", ["holiday destination", "vacation spot"], ["holiday city", "vacation destination"]),
    "lawyer": ("name", ["lawyer", "attorney"], ["legal counsel", "lawyer", "attorney"]),
    "accountant": ("name", ["accountant"], ["bookkeeper", "accountant", "tax adviser"]),
    "mentor": ("name", ["mentor"], ["adviser", "mentor", "coach"]),
    "neighbour": ("name", ["neighbour", "next-door neighbour"], ["neighbor", "neighbour", "person next door"]),
    "tutor": ("name", ["tutor"], ["teacher", "tutor", "private teacher"]),
    "team mascot": ("animal", ["team mascot", "mascot"], ["mascot", "team animal"]),
    "car colour": ("color", ["car colour", "car color"], ["colour of the car", "car color", "paint colour"]),
    "nickname": ("name1", ["nickname"], ["nick", "short name", "nickname"]),
}

# made-up names and places from syllables: unlimited, tokenized in many ways
_ON = "b br c ch d dr f g gr h j k kr l m n p pr r s sh st t th tr v w z".split() + ["", "", ""]
_VO = "a e i o u a e o ai ea ou y ie ia".split()
_CO = ["", "", "", "n", "r", "l", "s", "th", "m", "nd", "rt", "sk", "x", "v", "ck", "ll"]


def _made_up(r, lo=1, hi=3):
    n = min(hi, max(lo, r.choice([1, 2, 2, 2, 3])))
    w = "".join(r.choice(_ON) + r.choice(_VO) + r.choice(_CO) for _ in range(n))
    if len(w) < 3:
        w += r.choice(["n", "ra", "lo", "ve", "st"])
    return w[:1].upper() + w[1:]


TITLES = ["Dr.", "Ms.", "Mr.", "Mrs.", "Prof.", "Captain", "Aunt", "Uncle"]
RELATIONS = ["my sister", "my brother", "our landlord", "my cousin", "the new intern", "our neighbour",
             "my father", "the plumber", "the night nurse", "my grandmother", "the courier", "the treasurer"]
PREFIXES = ["", "", "", "", "Remember: ", "Reminder: ", "By the way, ", "FYI: ", "Note: ", "Just so you know, ",
            "For later: ", "Heads up, ", "Quick note: ", "Also, ", "As discussed, ", "Earlier today ",
            "This morning ", "Last week ", "Per the form, ", "In the ledger, ", "Record: ", "PS: ",
            "Keep this in mind: ", "Important, ", "One more thing: ", "Do not lose this: ", "Officially, "]
CORES = ["the {a} of {e} is {v}", "the {a} of {e} was {v}", "{e}'s {a} is {v}", "{e}'s {a} will be {v}",
         "{v} is {e}'s {a}", "{v} was given as the {a} of {e}", "{e} has {v} as the {a}",
         "{e} uses {v} as {pos} {a}", "{e} gave {v} as {pos} {a}", "{e} listed {v} as {pos} {a}",
         "{e}'s {a} is now {v}", "{e} set {pos} {a} to {v}", "{e} switched {pos} {a} to {v}",
         "the {a} assigned to {e} is {v}", "the {a} on file for {e} is {v}", "the {a} that {e} uses is {v}",
         "{e} confirmed that {pos} {a} is {v}", "{e} says {pos} {a} is {v}", "we have {v} down as the {a} of {e}",
         "{a} of {e}: {v}", "{e} - {a}: {v}", "{e} ({a}): {v}", "the {a} for {e} reads {v}",
         "our notes show {v} for the {a} of {e}", "{e} picked {v} for {pos} {a}", "{v}, that is the {a} of {e}",
         "{e} wrote down {v} as {pos} {a}", "the {a} belonging to {e} was set to {v}",
         "{e} and the {a} {v} go together", "{e} registered {v} as {pos} {a}"]
# The value stated before its attribute and entity, or the entity far from the value: the forms
# that the end-to-end benchmark's misses came from (its own templates stay out of training).
CORES_VALUE_FIRST = [
    "{v} is recorded as the {a} of {e}", "the files give {v} as the {a} for {e}",
    "the register shows {v} as {e}'s {a}", "{v} appears as the {a} of {e} in the database",
    "according to the ledger, {v} is the {a} of {e}", "the system has {v} as {e}'s {a}",
    "{v} has been assigned as the {a} for {e}", "{v} went down as the {a} of {e}",
    "the sheet says {v} for the {a} of {e}", "the directory shows {v} under the {a} of {e}",
    "they entered {v} as the {a} of {e}", "{v} (the {a} of {e})",
    "{v} will serve as the {a} for {e}", "the form names {v} as the {a} of {e}",
    "you will find {v} as the {a} of {e}", "the archive keeps {v} as {e}'s {a}",
    "{v} was chosen as the {a} by {e}", "{v} stands as the {a} of {e} for now",
    "{e} informed us that the {a} is {v}", "{e} mentioned that {pos} {a} is {v}",
    "{e} explained that the {a} was {v}", "{e} reported the {a} as {v}",
    "word from {e}: the {a} is {v}", "{e} let us know that the {a} will be {v}",
    "{e} phoned to say the {a} changed to {v}", "{e}, as it happens, has the {a} {v}",
    "{v}: that is the {a} of {e}", "{v} belongs to {e} as {pos} {a}", "{v} was noted as {e}'s {a}",
    "it is {v} that {e} uses as the {a}", "they wrote {v} down as the {a} of {e}",
    "{v} came back as the {a} of {e}", "our files hold {v} as the {a} for {e}",
    "{e} wrote to say that the {a} is {v}", "{e} said on the phone that the {a} is {v}"]
SUFFIXES = [".", ".", ".", ".", "!", ". Please keep it safe.", ", just so you know.", ". Don't forget it.",
            " (updated).", ", according to the form.", "; that is final.", ". Thanks."]
ASKS = ["What is the {a} for {e}?", "What's {e}'s {a}?", "Which {a} did {e} give?", "What {a} is on file for {e}?",
        "Any idea what {e}'s {a} is?", "Do you have the {a} of {e}?", "Give me {e}'s {a}.", "I need the {a} of {e}.",
        "What did {e} set as {pos} {a}?", "Please tell me the {a} that {e} uses.", "Can you tell me {e}'s {a}?",
        "What do we have as the {a} of {e}?", "Quick question: what is {e}'s {a}?", "Sorry, what was the {a} for {e}?",
        "Remind me of {e}'s {a}.", "What {a} did {e} mention?", "{e}: what is {pos} {a}?", "The {a} of {e} is what?",
        "And {e}'s {a}?", "Let me check: {e}'s {a} is?", "What was written down as the {a} of {e}?",
        "Need {e}'s {a}, what is it?", "what's the {a} of {e}", "Recall the {a} of {e}."]
ASKS_KIND = {"name": ["Who is {e}'s {a}?", "Who is the {a} of {e}?", "Who does {e} have as {pos} {a}?"],
             "date": ["When is {e}'s {a}?", "On what date is the {a} of {e}?", "What day is {e}'s {a}?"],
             "city": ["Which city is {e}'s {a}?", "What place is the {a} of {e}?", "Where is {e}'s {a}?"],
             "num": ["What number is {e}'s {a}?", "Which number is the {a} of {e}?"],
             "small": ["What number is {e}'s {a}?"],
             "code": ["What code is the {a} of {e}?"],
             "time": ["At what time is {e}'s {a}?", "When is the {a} of {e}?"]}
TRAIN_SCAFFOLDS = SCAFFOLDS + [("Q. ", "\nA."), ("Human: ", "\nAI:"), ("Ask: ", "\nReply:"), (">> ", "\n")]
EXTRA_CITIES = """Nantes Bremen Malmo Lucerne Bruges Sintra Tromso Mostar Sibiu Trieste Pisa Arles Olomouc
Poznan Cadiz Leiden Girona Kaunas Pecs Oulu Antalya Mombasa Arusha Kochi Mysore Hue Davao Cebu Hobart
Napier Nelson Regina Moncton Tulsa Reno Fargo Salem Eugene Macon""".split()
DOMAINS = ["mail.org", "post.net", "inbox.com", "example.org", "letters.io", "office.net"]


def _train_value(kind, r):
    if kind == "num":
        nd = r.randint(2, 7)
        return str(r.randrange(10 ** (nd - 1), 10 ** nd))
    if kind == "small":
        return str(r.randint(1, 60))
    if kind == "code":
        f = r.randrange(5)
        L = lambda n: "".join(r.choice(LETTERS) for _ in range(n))  # noqa: E731
        if f == 0:
            return L(r.randint(2, 3)) + "-" + str(r.randrange(10, 10000))
        if f == 1:
            return L(2) + str(r.randrange(100, 99999))
        if f == 2:
            return "".join(r.choice(LETTERS + "23456789") for _ in range(r.randint(4, 7)))
        if f == 3:
            return L(1) + str(r.randrange(1, 99)) + "-" + L(r.randint(1, 3))
        return str(r.randrange(10, 999)) + L(r.randint(1, 3))
    if kind == "date":
        m, d = r.choice(MONTH), r.randint(1, 31)
        return ("%s %d" % (m, d)) if r.random() < 0.7 else ("%d %s" % (d, m))
    if kind == "city":
        u = r.random()
        return r.choice(CITY) if u < 0.45 else r.choice(EXTRA_CITIES) if u < 0.7 else _made_up(r)
    if kind == "name":
        return "%s %s" % (r.choice(FIRST) if r.random() < 0.5 else _made_up(r),
                          r.choice(LAST) if r.random() < 0.5 else _made_up(r))
    if kind == "name1":
        return r.choice(FIRST) if r.random() < 0.5 else _made_up(r)
    if kind == "color":
        return r.choice(COLOR)
    if kind == "animal":
        return r.choice(ANIMAL) if r.random() < 0.6 else _made_up(r).lower()
    if kind == "blood":
        return r.choice(["A", "B", "AB", "O"]) + r.choice(["+", "-"])
    if kind == "email":
        return "%s.%s@%s" % (_made_up(r, 1, 2).lower(), _made_up(r, 1, 2).lower(), r.choice(DOMAINS))
    if kind == "time":
        return "%d:%02d" % (r.randint(1, 23), r.choice([0, 5, 10, 15, 20, 30, 40, 45, 50]))
    raise ValueError(kind)


class TrainFactMaker:
    """The training split: clusters of facts about one entity and about look-alikes (same first
    name or surname), so that tier 3 can hold the hard distractors the engine's recall brings:
    the same person with another attribute, another person with the same attribute."""

    def __init__(self, seed, value_first=0.35):
        self.rng = random.Random(seed)
        self.value_first = value_first   # share of composed statements with a CORES_VALUE_FIRST core
        cut_f, cut_l = len(FIRST) * 4 // 5, len(LAST) * 4 // 5
        self.first, self.last = FIRST[:cut_f], LAST[:cut_l]
        self.attrs = {**ATTRS, **EXTRA_ATTRS}
        self.names = sorted(self.attrs)

    def _first(self):
        return self.rng.choice(self.first) if self.rng.random() < 0.5 else _made_up(self.rng)

    def _last(self):
        return self.rng.choice(self.last) if self.rng.random() < 0.5 else _made_up(self.rng)

    def entity(self):
        r = self.rng
        u = r.random()
        if u < 0.72:
            return "%s %s" % (self._first(), self._last())
        if u < 0.8:
            return "%s %s" % (r.choice(TITLES), self._last())
        if u < 0.85:
            return r.choice(RELATIONS)
        if u < 0.92:
            return "the %s %s" % (r.choice(ADJ), r.choice(NOUN))
        return self._first()

    def lookalike(self, e):
        """Another entity that shares a word with e (or a fresh one)."""
        w = e.split()
        if len(w) == 2 and w[0][0].isupper() and w[0] not in TITLES:
            return "%s %s" % (w[0], self._last()) if self.rng.random() < 0.5 else "%s %s" % (self._first(), w[1])
        return self.entity()

    def state(self, e, attr, v):
        r = self.rng
        kind, say, _ = self.attrs[attr]
        a = r.choice(say)
        pos = r.choice(["his", "her", "their", "the"])
        if attr in ATTRS and r.random() < 0.3:
            s = r.choice(STATEMENTS[:N_TRAIN_STATEMENTS]).format(e=e, a=a, v=v)
        else:
            cores = CORES_VALUE_FIRST if r.random() < self.value_first else CORES
            s = r.choice(PREFIXES) + r.choice(cores).format(e=e, a=a, v=v, pos=pos) + r.choice(SUFFIXES)
        return s[0].upper() + s[1:]

    def ask(self, e, attr):
        r = self.rng
        kind, say, ask = self.attrs[attr]
        a = r.choice(ask) if r.random() < 0.8 else r.choice(say)
        pos = r.choice(["his", "her", "their", "the"])
        u = r.random()
        if u < 0.3 and attr in ATTRS:
            q = r.choice(QUESTIONS[:N_TRAIN_QUESTIONS]).format(e=e, a=a)
        elif u < 0.45 and kind in ASKS_KIND:
            q = r.choice(ASKS_KIND[kind]).format(e=e, a=a, pos=pos)
        else:
            q = r.choice(ASKS).format(e=e, a=a, pos=pos)
        q = q[0].upper() + q[1:]
        pre, suf = SCAFFOLDS[0] if r.random() < 0.45 else r.choice(TRAIN_SCAFFOLDS)
        return pre + q + suf

    def fact(self, e, attr):
        v = _train_value(self.attrs[attr][0], self.rng)
        return dict(statement=self.state(e, attr, v), question=self.ask(e, attr), answer=" " + v + ".",
                    entity=e, attribute=attr, value=v)

    def cluster(self):
        """2-5 facts: one entity with 1-3 attributes, and 0-2 look-alikes, one of them with an
        attribute of the first entity."""
        r = self.rng
        e = self.entity()
        attrs = r.sample(self.names, r.randint(1, 3))
        out = [self.fact(e, a) for a in attrs]
        for _ in range(r.choice([0, 1, 1, 2])):
            e2 = self.lookalike(e)
            if e2 == e:
                continue
            out.append(self.fact(e2, r.choice(attrs) if r.random() < 0.7 else r.choice(self.names)))
        return out



if __name__ == "__main__":
    for split in ("train", "eval"):
        fm = FactMaker(split, 1)
        for _ in range(4):
            f = fm.make()
            print(split, "|", f["statement"], "|", f["question"].replace("\n", "\\n"), "|", f["answer"])
    tm = TrainFactMaker(1)
    for _ in range(4):
        for f in tm.cluster():
            print("train+", "|", f["statement"], "|", f["question"].replace("\n", "\\n"), "|", f["answer"])
