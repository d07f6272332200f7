"""Storing: validation, questions, categories, duplicates, contradictions, edges, updates, forgetting."""
import json
import math
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import yourmemory
from yourmemory import InvalidInput, NotFound, YourMemory

ROOT = Path(__file__).resolve().parent.parent


def count_rows(memory, table):
    return memory.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def assert_replaces(memory, old: str, new: str) -> None:
    """Store ``old``, then ``new``: the new memory supersedes the old one."""
    first = memory.store(old)
    second = memory.store(new)
    assert second["action"] == "supersede" and second["supersededId"] == first["id"], second


def assert_replaces_past_a_nearer(memory, clock, old: str, nearer: str, new: str) -> None:
    """Store ``old``, then ``nearer`` (another fact, nearer to ``new``), then ``new``: ``old`` is superseded,
    ``nearer`` stays active."""
    first = memory.store(old)
    clock.advance(seconds=60)
    other = memory.store(nearer)
    clock.advance(seconds=60)
    stored = memory.store(new)
    assert stored["action"] == "supersede" and stored["supersededId"] == first["id"], stored
    assert memory.get(other["id"])["status"] == "active"


def assert_keeps(memory, old: str, new: str) -> None:
    """Store ``old``, then ``new``: both stay, the old one active."""
    first = memory.store(old)
    second = memory.store(new)
    assert second["action"] == "store", second
    assert memory.get(first["id"])["status"] == "active"


def test_a_new_memory_is_stored_with_its_vector_and_index_entry(memory):
    result = memory.store("The staging cluster runs Kubernetes 1.29", importance=0.8, category="fact")
    assert result["action"] == "store" and result["category"] == "fact" and not result["categoryInferred"]
    assert count_rows(memory, "memory_vectors") == 1
    assert memory.db.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH 'kubernetes'").fetchall() == [
        (result["id"],)]


@pytest.mark.parametrize("text, category", [
    ("The build fails with a segfault when LTO is enabled", "failure"),
    ("We should always pin the Node version in CI", "strategy"),
    ("The user probably works in the Berlin office", "assumption"),
    ("The API gateway listens on port 8443", "fact"),
    # A failure word naming a kind of tool is no failure (which would fade at twice a fact's rate).
    ("Sentry is used for error monitoring", "fact"),
    ("Sentry is our error-tracking tool", "fact"),
    ("Our bug tracker is Linear", "fact"),
    ("The app crashes on startup since the error handling refactor", "failure"),
    # A plural is a kind of thing, not one that happened.
    ("Always wrap errors with context using fmt.Errorf and %w", "strategy"),
    ("Bugs are tracked in Linear", "fact"),
])
def test_category_is_inferred_when_absent_and_the_reply_says_so(memory, text, category):
    result = memory.store(text)
    assert (result["category"], result["categoryInferred"]) == (category, True)


@pytest.mark.parametrize("question", [
    "Which database do we use?",
    "So what did the user decide about tabs?",
    "Caroline: Have you been to the new climbing gym? What did you think?",
    "How about you?",  # "how about" asking back, not proposing
    "What about the budget?",
])
def test_pure_questions_are_refused(memory, question):
    with pytest.raises(InvalidInput, match="content: this is a question"):
        memory.store(question)
    assert count_rows(memory, "memories") == 0


@pytest.mark.parametrize("statement", [
    "I went hiking last week — have you been?",
    "Caroline: I finally finished the painting; want to see it?",
    "We moved the API to Go. Any objections?",
    "The user prefers tabs?! No, spaces.",
    "The question was: should we use Redis for caching sessions?",  # "The question was" is no speaker
    "Andrew: How about cutting our energy bill by drying clothes outside?",  # a suggestion says what was proposed
    "Why don't we move the retro to Friday afternoons?",
])
def test_a_turn_that_also_states_something_is_kept(memory, statement):
    assert memory.store(statement)["action"] == "store"


@pytest.mark.parametrize("text, said_by", [
    ("Ada: I moved to Lyon", "ada"),
    ("Dr. Ada Lovelace: the engine runs", "dr. ada lovelace"),
    ("Ludwig van Beethoven: I moved to Vienna", "ludwig van beethoven"),
    ("Decision: our CI now runs on Buildkite", None),  # a note's label, not a speaker
    ("TODO: rotate the staging keys", None),
    ("Indentation preference: 4 spaces", None),  # a phrase, not a name
])
def test_a_speaker_is_a_name_before_a_colon_not_a_label_or_a_phrase(text, said_by):
    assert yourmemory.speaker(text) == said_by


def test_two_like_events_of_one_person_are_both_kept(memory):
    """Very close, same subject, other objects: a restatement by the rule for facts, but an event stays true
    when a similar one follows (the reliability stress met such pairs and lost one of them)."""
    first = memory.store("Quentin cleaned the wooden observatory near the east gate at dawn, reference zs1u48z.")
    second = memory.store("Quentin cleaned the tall clocktower near the salt marsh at midnight, reference zs2s139z.")
    assert second["action"] == "store" and memory.get(first["id"])["status"] == "active"


def test_a_labelled_note_can_announce_a_change(memory):
    """Read as said by "Decision", it was a quote, which only a word-for-word change replaces."""
    old = memory.store("We use Jenkins for CI")
    new = memory.store("Decision: our CI now runs on Buildkite")
    assert (new["action"], new.get("supersededId")) == ("supersede", old["id"])


@pytest.mark.parametrize("kwargs, field", [
    ({"content": ""}, "content"),
    ({"content": "   \n"}, "content"),
    ({"content": 42}, "content"),
    ({"content": "x" * (yourmemory.MAX_CONTENT_CHARS + 1)}, "content"),
    ({"content": "has a \x00 NUL"}, "content"),
    ({"content": "lone \ud800 surrogate"}, "content"),
    ({"content": "ok", "importance": 1.5}, "importance"),
    ({"content": "ok", "importance": -0.1}, "importance"),
    ({"content": "ok", "importance": math.nan}, "importance"),
    ({"content": "ok", "importance": "high"}, "importance"),
    ({"content": "ok", "importance": True}, "importance"),
    ({"content": "ok", "category": "opinion"}, "category"),
    ({"content": "ok", "visibility": "secret"}, "visibility"),
    ({"content": "ok", "api_key": "ym_guess"}, "api_key"),
    ({"content": "ok", "user_id": ""}, "user_id"),
])
def test_bad_input_names_the_field_and_writes_nothing(memory, kwargs, field):
    with pytest.raises(InvalidInput) as error:
        memory.store(**kwargs)
    assert error.value.field == field and str(error.value).startswith(field + ":")
    assert count_rows(memory, "memories") == count_rows(memory, "memory_vectors") == 0


def test_a_near_duplicate_reinforces_the_existing_memory(memory):
    first = memory.store("The user prefers dark mode in every editor", importance=0.4)
    again = memory.store("The user prefers dark mode in every editor.", importance=0.7)
    assert again["action"] == "reinforce" and again["id"] == first["id"]
    row = memory.get(first["id"])
    assert row["recall_count"] == 1 and row["importance"] == 0.7
    assert count_rows(memory, "memories") == 1


def test_a_paraphrase_that_adds_information_is_not_merged(memory):
    memory.store("The user prefers dark mode")
    result = memory.store("The user prefers dark mode, except in the terminal")
    assert result["action"] == "store"
    assert count_rows(memory, "memories") == 2


@pytest.mark.parametrize("old, new", [
    ("Deploys are never allowed on Fridays", "Deploys are allowed on Fridays"),  # a negation dropped
    ("Bob is not on call this week", "Bob is on call this week"),
    ("Alice reports to Bob", "Bob reports to Alice"),  # the same words, the other way round
    ("We migrated from MySQL to Postgres", "We migrated from Postgres to MySQL"),
    ("Ada prefers tabs over spaces", "Ada prefers spaces over tabs"),
])
def test_a_reversal_with_no_new_word_is_not_taken_for_a_duplicate(memory, old, new):
    """Close in meaning and no new content word, yet it says the opposite: reinforcing the old memory
    would throw the new statement away."""
    memory.store(old)
    result = memory.store(new)
    assert result["action"] != "reinforce"
    assert memory.get(result["id"])["content"] == new and memory.get(result["id"])["status"] == "active"


@pytest.mark.parametrize("old, new", [
    ("The user prefers tabs for indentation", "The user prefers spaces for indentation"),
    ("The project database is Postgres 15", "The project database is Postgres 16"),
    ("Our team lives in Berlin", "Our team lives in Lisbon"),
])
def test_a_changed_value_supersedes_the_old_memory(memory, old, new):
    first = memory.store(old)
    second = memory.store(new)
    assert second["action"] == "supersede" and second["supersededId"] == first["id"]
    old_row = memory.get(first["id"])
    assert old_row["status"] == "superseded" and old_row["superseded_by"] == second["id"]
    assert old_row["content"] == old, "the old memory is kept as history"
    recalled = [m["id"] for m in memory.recall(old, top_k=10)["memories"]]
    assert first["id"] not in recalled and second["id"] in recalled


@pytest.mark.parametrize("old, new", [
    ("We deploy the API on Heroku", "We moved the API deployment to Fly.io"),
    ("The docs site is built with Sphinx", "We switched the docs site to MkDocs"),
    ("Priya's team standup is at 9:30", "Priya's team standup is now at 10:15"),
    ("My team lead is Oskar", "My new team lead is Farah"),  # newness said of the fact itself
    ("The visa application deadline is 2 May", "The visa deadline was extended to 20 May"),  # marks nest
    ("The nginx config lives in /etc/nginx/sites-enabled/app",  # "we" act on the thing the old text is about
     "We moved the nginx config into the repo under deploy/nginx.conf"),
    ("The requests library is pinned to 2.28",  # lemmatised "repinne" by the small model
     "We repinned requests to 2.32 after the security advisory"),
    ("The release manager for v5 is Hana", "Lee took over as v5 release manager"),  # a phrasal change
    ("The connection pool size is 10", "The connection pool is set to 50 connections"),  # a setting, not a routine
    ("Our video calls use Zoom", "We switched from Zoom to Google Meet for video calls"),  # names what it replaced
    ("Leo's favourite band is Muse", "Leo says his favourite band is Wet Leg these days"),
    ("Globex Inc runs its chat on Slack", "Globex moved its chat to Microsoft Teams"),  # one owner, named shorter
    ("Standup is at 9:30", "Standup moved to 10:00 from Monday"),  # "from Monday" is a time, not what it replaced
    ("Our CI runs on Jenkins", "We replaced it with Buildkite for CI"),  # nor is "it"
    ("The team tracks tasks in a spreadsheet", "We switched from spreadsheets to Airtable for tasks"),  # a plural
    ("The launch is on Thursday", "The launch moves to Friday"),  # a change planned in the simple present
    ("The office is on the 3rd floor.", "As of Monday, the office is on the 7th floor."),  # from a time on
    ("The user's rent is $1,800 a month.", "The user's rent went up to $1,950 a month."),  # an amount went up
    ("The production database is PostgreSQL 14.", "The prod DB was upgraded to PostgreSQL 15."),  # short forms
    ("Every PR needs one approval.", "PRs now need two approvals before merging."),  # a number for a number
    ("Ingrid works at Spotify.", "Ingrid joined Klarna as a data engineer."),  # a named person's new employer
    ("Arjun is a software engineer at Atlassian.", "Arjun started at Skyline Robotics."),
    ("Northwind is one of our customers.", "Northwind is no longer a customer; we signed Fabrikam in its place."),
    ("The mobile app ships a release every two weeks.", "We're moving the mobile app to a monthly release train."),
    # values the small model mistags (a verb, punctuation...): words of letters and digits, a name no dictionary
    # lists, a name by its shape
    ("The staging VPN password is redkite19.", "The staging VPN password was changed to greenowl52."),
    ("The build cache key is cachev3.", "The build cache key was bumped to cachev4."),
    ("The API client uses requests.", "We switched the API client to httpx."),
    ("The billing service uses RabbitMQ.", "The billing service was moved onto Kafka."),
    # one name each, in two slots, with a noun in common
    ("The design team keeps its specs in Notion.", "Design specs moved to Coda."),
    # one subject, though the small model reads a sentence's first plural as a name, or mangles a name's lemma
    ("Demos are on Friday afternoons.", "The demo moved to Thursday mornings."),
    ("The Hermes service is built on Django 4.", "Hermes now runs Django 5."),
    # when the change came is no value of it
    ("Omar does all his browsing in Firefox.", "Omar switched over to Chrome last month."),
    ("Lina does all her coding in Emacs.", "Lina switched over to Vim last week."),
])
def test_an_announced_change_in_other_words_supersedes(memory, old, new):
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Marta is a nurse at Riverside Hospital.", "Marta works at Northgate Clinic."),  # no change announced
    ("Omar works at the Met Office.", "Omar's employer is Arup."),
    ("The user's sister Hanna works at the town museum.", "Hanna took a job at Lindqvist Design."),  # cosine 0.39
    ("My dad works at the post office.", "My dad took a job at a logistics firm called Trackwise."),
    ("Kofi left Revolut for Wise.", "Kofi works at a tiny startup called Brightloop."),  # cosine 0.35
    ("Lucia works for Telefónica in Madrid.", "Lucia is at Glovo now."),
    ("The user is employed by Siemens.", "The user works for Datadog."),
    ("Silje Berg is an analyst at Nordlys Capital.", "Silje joined Fjordbank."),  # a part of her name
])
def test_a_new_employer_of_the_same_person_supersedes(memory, old, new):
    """One works at one employer at a time: a text saying where someone works replaces the one before."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Rosa lives in Leeds.", "Rosa's flat is in Bristol."),
    ("Hugo lives in Gothenburg.", "Hugo has relocated to Oslo."),
    ("Tom, the user's brother, lives in Toronto.", "The user's brother Tom is living in Vancouver."),
    ("I live in Berlin.", "I moved from Berlin to Lisbon in the spring."),  # a move that names the home it left
    ("Kwame settled in Kigali.", "Kwame's home base is Lagos."),
])
def test_a_new_home_of_the_same_person_supersedes(memory, old, new):
    """One lives in one place at a time: a text saying where someone lives replaces the one before."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("The search API allows 50 requests per minute per key.",
     "The search API rate limit is 200 requests per minute per key."),
    ("The export job's timeout is 30 seconds.", "The export job times out after 2 minutes."),  # one unit kind
    ("Attachments are capped at 10 MB.", "The maximum attachment size is 25 MB."),
    ("We scaled the export queue to 12 Celery workers.",
     "The export queue is running 8 Celery workers after the cost review."),
])
def test_another_amount_of_the_same_thing_supersedes(memory, old, new):
    """Another number of the same unit for the same thing, said in other words (cosine >= 0.65)."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("The beta launches on September 3.", "The beta launch is pushed to September 24."),
    ("The visa application is due on 1 June.", "The visa application deadline is 15 June."),
    ("The design team's standup is at 11:00.", "The design team does standup at 10:45."),
    ("The design team holds standup at 10:00.", "Design standup happens at 9:15."),  # two verbs of scheduling
])
def test_another_date_of_the_same_thing_supersedes(memory, old, new):
    """Another time for the same thing, said in other words, no change announced (cosine >= 0.6)."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("The scheduler runs on Node 18.", "The scheduler's runtime is Node 22."),
    ("The reporting portal was upgraded to Django 4.2.", "Django 5.1 powers the reporting portal."),
    ("The web frontend builds with Node 18.", "The frontend build image uses Node 22."),  # "web" said once
    ("The app supports iOS 15 and later.", "The app's minimum supported version is iOS 17."),  # two floors
])
def test_another_version_of_the_same_name_supersedes(memory, old, new):
    """The same named thing with another version, said in other words, no change announced."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Marcus lives in Leeds. He works at the BBC and plays in a band on Fridays.", "Marcus's flat is in Bristol."),
    ("Nora works at Allegro. She mentors two juniors and runs the book club.", "Nora works at Grafana Labs."),
    ("Ingrid works at Spotify. She leads the data team and mentors two juniors.",
     "Ingrid joined Klarna as a data engineer."),
    ("The API is on Node 18. It serves 2,000 requests a second and is deployed on Fridays.",
     "The API's runtime is Node 22."),
    ("Uploads are capped at 10 MB. Larger files go through the resumable endpoint.",
     "The maximum upload size is 25 MB."),
])
def test_a_paragraph_stays_when_a_fact_changes_its_first_sentence(memory, old, new):
    """A paragraph is a record: the value rules read one sentence, and superseding the whole paragraph for a new
    value of its first sentence would hide the rest of it."""
    assert_keeps(memory, old, new)


@pytest.mark.parametrize("old, new", [
    # another subject, the same value: the changed words name who or what, not the value
    ("My mother lives in Hamburg.", "My father lives in Hamburg."),
    ("Kenji is on vacation next week.", "Aisha is on vacation next week."),
    ("My mother's birthday is May 3.", "My father's birthday is May 3."),
    ("The staging database runs PostgreSQL 16.", "The production database runs PostgreSQL 16."),
    ("Deploys to staging are automatic.", "Deploys to production are automatic."),
    ("The API's p95 latency is 120 ms.", "The API's p99 latency is 120 ms."),
    ("The iOS app is written in Swift.", "The Android app is written in Swift."),
    # a narrower case of the fact, not a new value of it
    ("The API rate limit is 100 requests per minute.", "The API rate limit for admin users is 1000 requests per minute."),
    ("The upload size limit is 10 MB.", "The upload size limit for images is 5 MB."),
    ("Standup is at 9:30 on weekdays.", "Standup is at 11:00 on Fridays."),
    ("Lena's bedtime is 20:00 on school nights.", "Lena's bedtime is 21:00 on weekends."),
    # relations that hold several values at once, and one more of a kind
    ("Lena is allergic to peanuts.", "Lena is allergic to kiwi."),
    ("Omar is allergic to penicillin.", "Omar is allergic to Aspirin."),  # cosine 0.82, the restatement rule's band
    ("Lucia admires Frida Kahlo.", "Lucia admires Georgia O'Keeffe."),
    ("Sara volunteers at the Red Cross.", "Sara volunteers at the local food bank."),
    ("The app supports English.", "The app supports Spanish."),
    ("We had an outage on March 12 caused by an expired TLS certificate.",
     "We had another outage on May 20 caused by a DNS misconfiguration."),
    ("We use Datadog for monitoring.", "We now also use Sentry for monitoring."),  # announced, but one more
    ("Our docs are available in English.", "Our docs are now available in German as well."),
    ("Kenji is learning Korean.", "Kenji has started learning Italian as well."),
    ("The app supports English.", "The app now supports Spanish."),
    ("Rex is my dog.", "Max is my new dog."),  # a dog is no role one holds at a time
    ("Globex is our customer.", "Acme is our new customer."),
    # no change yet, or none at all
    ("The frontend is hosted on Vercel.", "We might move the frontend to Netlify next quarter."),
    ("Production runs on ECS in eu-west-1.", "We chose ECS over Kubernetes for simplicity."),
    ("The main branch is protected; nobody pushes directly to it.", "We don't use feature branches longer than a week."),
    ("My flight to Osaka is on October 9.", "My flight back from Lisbon is on June 5 at 18:40."),
    ("The user lives in Glasgow.", "The user went up to Inverness for the weekend."),  # "went up" of no amount
    ("The staging cluster runs Kubernetes 1.27.",
     "I think the staging cluster might get upgraded to Kubernetes 1.29 soon."),  # a guess (cosine 0.85)
    ("We are flying to Tokyo on April 3.", "We are flying from Osaka on April 17."),  # to / from: another trip
    ("The shuttle leaves for the airport at 9:00.", "The shuttle leaves from the hotel at 9:30."),  # a change verb,
    # but the same one both times: for / from tell two rides (cosine 0.88)
    # names after another preposition are not of one kind: a person / a company, a tool / a language
    ("Tom works for Acme.", "Tom now works for Sarah."),
    ("Mia writes in English.", "Mia now writes in Notion."),
    # a noun no dictionary lists is a value only by its place, as any noun: "dockerfile" is the subject of "checked in"
    ("The API repo has a dockerfile checked in.", "The API repo switched to Podman."),
    # a time for a place: a time is the new value where the old text names none, unless it is all that changed
    ("The team retro is in the big room.", "The team retro moved to Friday mornings."),
    ("The design review is held in the Atrium.", "The design review moved to Thursdays."),
    # one name each in two slots, but no noun in common to say the names are of one kind of thing
    ("Omar uses Chrome.", "Omar has Grammarly installed everywhere."),
    ("Lena joined Stripe.", "Lena relocated to Dublin."),
    ("Kofi started at Monzo.", "Kofi was promoted to Principal Engineer."),
    # "current" is no value: the new text names only what the old one already holds
    ("Releases are tagged with semantic versions like v2.3.0.", "The current release is v2.3.0."),
    # "new" in both is the thing's name, no newness announced
    ("The new dashboard will be built in React.", "The new dashboard has to support dark mode."),
    ("Internally the new search feature goes by Osprey.", "The new search feature is on the Q3 roadmap."),
    # an announced change whose values are of another kind than the old text's: a name for a time, a number for a name
    ("Ingrid mentors junior engineers on weekends.", "Ingrid joined Klarna as a data engineer."),
    ("PRs must pass CI before merging.", "PRs now need two approvals before merging."),
    ("Priya has been a product manager for six years.", "Priya joined Klarna as a product manager."),
    ("Ingrid works at Spotify.", "Ingrid joined the Spotify running club."),  # joining no employer by name
    # where someone is, or what they work with, is no employer
    ("Ana works at Google.", "Ana is at Heathrow."),
    ("Ana works at Google.", "Ana is with Tom at the conference."),
    ("Ingrid works with Kubernetes every day.", "Ingrid works at Spotify."),
    ("I work at a café on Fridays.", "I work at Shopify."),
    ("Hana works out at the gym on Elm Street.", "Hana works at Deutsche Bank."),
    ("Ana is a speaker at PyCon.", "Ana works at Google."),  # what one is at a place without working there
    ("Ana is a member at the Riverside gym.", "Ana works at Google."),
    # another person's employer, and a role or a tool said beside an employer
    ("Mia works at Zalando.", "Mia's brother works at Bosch."),
    ("Lena Okafor works at Brightwell Analytics.", "Lena Smith works at Koru Health."),
    ("Lena Okafor works at Brightwell Analytics.", "Lena Okafor is a data engineer."),  # cosine 0.83
    ("Tomasz works at Grafana Labs.", "Tomasz has moved over to Zed."),
    # versions of one name for two subjects, and a floor beside the version one runs
    ("The staging cluster runs Kubernetes 1.27.", "The production cluster runs Kubernetes 1.29."),
    ("The frontend uses Node 18.", "The backend uses Node 20."),
    ("The iOS app is built with Xcode 15.", "The macOS app is built with Xcode 16."),
    ("The APAC cluster runs Kubernetes 1.27.", "The US cluster runs Kubernetes 1.29."),  # "US" is no stop word "us"
    ("The SDK supports Python 3.9 and later.", "The SDK is tested on Python 3.12."),
    ("The user's flight to Rome is on June 12.", "The user's return flight from Rome is on June 20."),
    # amounts of two things, of two times, or of a narrower case
    ("The upload size limit is 10 MB.", "The upload size limit for images is 5 MB."),
    ("The API's p95 latency is 120 ms.", "The API's p99 latency is 150 ms."),
    ("The team has 6 engineers.", "The platform team has 8 engineers."),
    ("We had 3 outages in March.", "We had 5 outages in April."),
    ("The staging cluster has 3 nodes.", "The production cluster has 5 nodes."),
    ("The export API times out after 5 seconds.", "The export API caches results for 30 seconds."),  # two relations
    ("Production requests time out after 15 seconds.",
     "Production logs every request that takes longer than 2 seconds."),  # a bound, not the setting
    # times of two things, of two ends, of a narrower case, or of a recurring thing
    ("The store opens at 9:00 on weekdays.", "The store opens at 10:00 on Sundays."),
    ("The office opens at 9:00.", "The office closes at 18:00."),
    ("The release is on March 3.", "The release notes are due on March 5."),
    ("Priya's birthday is May 3.", "Priya's anniversary is June 10."),
    ("This week's on-call is Marcus.", "Marcus is on call again next month."),
    # where someone grew up, works or stays a while, or where someone else lives
    ("Marcus lives in Leeds.", "Marcus grew up in Bristol."),
    ("Marcus lives in Leeds.", "Marcus's parents live in York."),
    ("Marcus lives in Leeds.", "Marcus's office is in Manchester."),
    ("Dana is based in Austin.", "Dana is visiting Denver this week."),
    ("Marcus lives in Leeds.", "Marcus lives near Roundhay Park."),
    ("Maya owns the billing module.", "Dev reviews the billing module."),  # reviewing is not owning
    # two roles of one person, and two groups of one team (a review found both superseded when what a verb makes
    # of its object, "made partner", and a number word, "a dozen", were taken for values)
    ("Dana was made partner at the firm", "Dana was made head of litigation at the firm"),
    ("Leo was elected treasurer of the club.", "Leo was appointed captain of the club."),
    ("The team has a dozen engineers.", "The team has a handful of designers."),
    # two people whose names differ by a final s (merged when words were compared without a plural s)
    ("Lucas's laptop runs macOS 14.", "Luca's laptop runs macOS 15."),
])
def test_another_fact_like_an_older_one_does_not_replace_it(memory, old, new):
    """Pairs a user met in realistic use (2026-12-01), or a review found (2026-12-05), each of which superseded the
    older memory under some version of the store rules and so hid it from recall for good: information lost. Both
    must stay active."""
    first = memory.store(old)
    second = memory.store(new)
    assert second["action"] == "store", second
    assert memory.get(first["id"])["status"] == "active"


@pytest.mark.parametrize("old, new", [
    ("Sofia is pregnant.", "Sofia was pregnant."),
    ("Kenji is the tech lead.", "Kenji was the tech lead."),
    ("Maria was the tech lead.", "Maria is the tech lead."),
])
def test_a_change_of_tense_is_not_taken_for_a_duplicate(memory, old, new):
    memory.store(old)
    result = memory.store(new)
    assert result["action"] != "reinforce", result
    assert memory.get(result["id"])["content"] == new


@pytest.mark.parametrize("old, new", [
    ("Tom Becker is the product manager.", "Aisha Khan is the new product manager."),
    ("Maria Gonzalez is our tech lead.", "Kenji Watanabe is our new tech lead."),
    ("Dr. Hoffmann is my GP.", "Dr. Yilmaz is my new GP."),
])
def test_a_role_announced_with_a_new_holder_supersedes_the_old_holder(memory, old, new):
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Maya owns the billing module.", "Dev now owns the billing module."),
    ("The billing module is maintained by Maya.", "Dev now owns the billing module."),
    ("Hannah owns the auth service.", "Ravi took over the auth service from Hannah."),
    ("Elif runs the release process.", "Gustavo now runs the release process."),
    # said in other words, with no change announced (cosine >= 0.6)
    ("The ledger service is owned by Ilya Petrenko.", "Bettina Kraus is the owner of the ledger service."),
    ("Kasia owns the refunds service.", "The refunds service's owner is Emeka."),
    ("The alerts service belongs to Beatriz now.", "Dmitri is the owner of the alerts service."),
])
def test_a_new_holder_of_the_same_thing_supersedes_the_old_holder(memory, old, new):
    """A person holding a thing is its value, not its owner: the thing held is the subject of the fact."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("holder, nearer, new", [
    # Found in realistic use: the nearer fact about the thing was superseded and Maya's ownership left live.
    ("Maya owns the billing module.", "The billing module talks to Stripe through a thin adapter.",
     "Dev now owns the billing module."),
    # And the new holder's own role (a user-style test, thirteenth session): Tom's ownership stayed live.
    ("Tom Becker owns the infrastructure and Terraform code.",
     "Aisha Khan is the DevOps engineer on the platform team.",
     "Aisha Khan now owns the infrastructure and Terraform code."),
])
def test_a_new_holder_replaces_the_old_holder_not_another_fact_nearer_to_it(memory, clock, holder, nearer, new):
    assert_replaces_past_a_nearer(memory, clock, holder, nearer, new)


def test_a_holder_of_another_thing_is_kept(memory):
    first = memory.store("Sara owns the events budget.")
    assert memory.store("Tom owns the marketing budget now.")["action"] == "store"
    assert memory.get(first["id"])["status"] == "active"


@pytest.mark.parametrize("old, new", [
    # Cosine 0.36 and 0.42: worded too far apart for any other rule, which starts at 0.45.
    ("Monitoring is done with Datadog.", "We replaced Datadog with Grafana and Prometheus to cut costs."),
    ("Client state is managed with Redux.", "We replaced Redux with Zustand."),
    # Cosine 0.64, but "CircleCI" is one word: the old subject "CI" is not among the new text's words.
    ("Our CI runs on CircleCI.", "We replaced CircleCI with GitHub Actions."),
    ("The CEO of our company is Martin Hale.", "Rebecca Stone replaced Martin Hale as CEO."),
    ("Luis is the tech lead of the search team.", "Sana replaced Luis as tech lead of the search team."),  # the holder
])
def test_a_change_that_names_what_it_replaced_supersedes_the_memory_holding_it(memory, old, new):
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("The company buys Dell laptops for new hires.", "Laptops are replaced every three years."),  # a routine
    ("Datadog bills us per monitored host.", "We replaced Datadog with Grafana."),  # about Datadog, not a value
    ("Ada: monitoring is done with Datadog", "Ada: we replaced Datadog with Grafana"),  # quotes are records
    # A review's cases. Plans and a denial are no replacement:
    ("Monitoring is done with Datadog.", "We will replace Datadog with Grafana next quarter."),
    ("Monitoring is done with Datadog.", "TODO: replace Datadog with Grafana."),
    ("Monitoring is done with Datadog.", "We are replacing Datadog with Grafana next quarter."),
    ("Monitoring is done with Datadog.", "Nobody has replaced Datadog yet."),
    ("Luis is the tech lead of the search team.", "Sana replaced Luis as on-call engineer this week."),  # another role
    # No name replaced (whose batteries?), or one value of several (pytest still runs):
    ("The smoke detector in the server room uses AA batteries.", "Bob replaced the batteries."),
    ("The payments service talks to Stripe through a thin wrapper.",
     "Carol replaced the wrapper with the official SDK in the orders service."),
    ("The CI pipeline runs pytest and flake8.", "We replaced flake8 with Ruff."),
    # Another owner, and a paragraph (a record):
    ("Bob's editor is Emacs.", "Alice replaced Emacs."),
    ("Monitoring is done with Datadog, and on-call alerts go through PagerDuty to the #ops channel. Dashboards "
     "are reviewed on Mondays.", "We replaced Datadog with Grafana and Prometheus."),
])
def test_a_named_replacement_leaves_a_routine_a_fact_about_the_thing_and_a_quote_alone(memory, old, new):
    assert_keeps(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Omar takes metformin.", "Omar stopped taking metformin."),  # no new value: the old one is over
    ("Daniel subscribes to Netflix.", "Daniel cancelled his Netflix subscription."),
    ("Aisha listens to The Daily podcast.", "Aisha unsubscribed from The Daily and listens to Up First instead."),
    ("Tom works at Google.", "Tom no longer works at Google."),
    ("Emma is a member of the Sierra Club.", "Emma left the Sierra Club."),
    ("Rosa is a data scientist at Zalando.", "Rosa left Zalando for Booking.com."),  # left for: a new value
    ("Maya leads the Atlas project.", "Maya stopped leading the Atlas project."),  # the relation itself stopped
    ("Nina goes to the Tuesday yoga class.", "Nina no longer goes to the Tuesday yoga class."),
    ("Greta contributes to the Linux kernel.", "Greta no longer contributes to the Linux kernel."),
    ("Hugo is a member of the rowing club.", "Hugo quit the rowing club."),
    ("Clara plays the piano.", "Clara gave up the piano years ago and plays the violin now."),  # "ago": done
])
def test_an_ending_said_of_the_value_the_old_memory_holds_supersedes_it(memory, old, new):
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Omar is allergic to aspirin.", "Omar stopped taking aspirin."),  # another relation to the same thing
    ("Sam works in Paris.", "Sam no longer lives in Paris."),
    ("The app supports English and Russian.", "We removed Russian support from the app."),  # English stays
    ("Lena works at Google.", "Lena's husband left Google last year."),  # someone else
    ("Priya's team uses Jira.", "Priya dropped Jira tickets for the hackathon week."),  # for a while, not her team
    ("The user drinks coffee every morning.", "The user stopped drinking coffee after 2pm."),  # a part of it
    # something named after the value, not the value:
    ("The frontend uses React.", "We removed React Router from the frontend."),
    ("Our app integrates with Slack.", "We removed the Slack notifications from the admin panel."),
    ("Maya leads the Atlas project.", "Maya stopped the Atlas deploy because tests failed."),
    ("Our CI runs on Jenkins.", "We dropped the Jenkins nightly job."),
    ("Tom is a member of the chess club.", "Tom left the chess club meeting early."),
    # not done:
    ("We store uploads in S3.", "We will stop storing uploads in S3 next quarter."),
    ("The user takes vitamin D.", "The user didn't stop taking vitamin D."),
    ("Omar takes metformin.", "Omar stopped taking metformin temporarily."),
    ("Omar takes metformin.", "Omar stopped taking metformin for a week before surgery."),
    ("Carlos works at Deloitte.", "Carlos nearly left Deloitte last year."),
    ("Ana lives in Berlin.", "Ana left Berlin yesterday."),  # a trip
    # someone else's, more than was ended, another part:
    ("My son plays the piano.", "I quit the piano."),
    ("My husband works at Google.", "I left Google."),
    ("Omar takes metformin and lisinopril.", "Omar stopped taking metformin."),
    ("We use Slack.", "We removed Slack from the marketing team."),
    ("The mobile team uses Jira.", "We removed Jira from the web team."),
])
def test_an_ending_of_something_else_leaves_the_old_memory_alone(memory, old, new):
    assert_keeps(memory, old, new)


@pytest.mark.parametrize("text", ["We dropped Slack.", "Tom no longer works at Google.", "Emma left the Sierra Club."])
def test_an_ending_stored_twice_reinforces_itself(memory, text):
    first = memory.store(text)
    second = memory.store(text)
    assert second["action"] == "reinforce" and second["id"] == first["id"], second


def test_a_new_holder_of_another_role_does_not_supersede(memory):
    memory.store("Tom Becker is the product manager.")
    assert memory.store("Aisha Khan is the new product manager for the mobile app.")["action"] == "store"


def test_a_new_holder_of_a_role_supersedes_the_old_one(memory):
    """The subject changes, but it is the value: one person is the product manager at a time."""
    first = memory.store("Kenji Watanabe is the tech lead for the payments team.")
    second = memory.store("Maria Gonzalez is the tech lead for the payments team.")
    assert second["action"] == "supersede" and second["supersededId"] == first["id"], second


def test_an_announced_change_supersedes_only_one_of_the_memories_it_may_replace(memory, clock):
    """Another fact about the same subject also passes the tests of an update ("capped at 15 minutes":
    same subject, a number on both sides); only one is replaced, the one that held the time."""
    start = memory.store("Standup is at 9:30.")
    clock.advance(days=1)
    length = memory.store("Standup is capped at 15 minutes.")
    clock.advance(days=1)
    moved = memory.store("Standup moved to 10:00.")
    assert moved["action"] == "supersede" and moved["supersededId"] == start["id"], moved
    assert memory.get(length["id"])["status"] == "active"


@pytest.mark.parametrize("value, other, change", [
    # both pass the tests of an update and the other fact is nearer; the change names a tool, as the value did
    ("Grace's team tracks bugs in Jira.", "Grace's team tracks bugs with a severity label.",
     "Grace's team moved bug tracking to Linear."),
    ("The team's video calls are on Zoom.", "The team's video calls are recorded for absent colleagues.",
     "We moved the team's video calls to Google Meet."),
    # the value is a little less similar (0.44) than an update must be alone, the other fact more (0.47)
    ("The team's video calls are on Zoom.", "Cameras are optional in internal video calls.",
     "We moved our video calls to Google Meet."),
])
def test_a_change_replaces_the_fact_that_held_a_value_of_its_kind_not_a_nearer_fact_about_the_same_thing(
        memory, clock, value, other, change):
    assert_replaces_past_a_nearer(memory, clock, value, other, change)


def test_of_the_memories_a_change_may_replace_it_takes_the_one_whose_value_it_names_again():
    """Both older texts name a tool, as the change does; only one of them holds the tool the change moved off."""
    change = yourmemory.parse("The web team moved its pipelines off CircleCI and onto Buildkite.")
    nearer = yourmemory.parse("The web team's CI caches Gradle and npm dependencies between runs.")
    farther = yourmemory.parse("The web team runs its builds on CircleCI.")
    candidates = [(1, nearer.text, lambda: nearer), (2, farther.text, lambda: farther)]
    assert yourmemory._likeliest_replaced(change, candidates) == (2, farther.text)
    another = yourmemory.parse("The web team's CI posts its results to Slack.")  # a name too, named by neither
    assert yourmemory._likeliest_replaced(change, [*candidates[:1], (3, another.text, lambda: another)]) == \
        (1, nearer.text), "alike, the nearer"


@pytest.mark.parametrize("change, nearer, farther", [
    # a time for a time, not a count ("end of the day" is a time; "a day" of "four PRs a day" counts)
    ("Priya moved her review slot to the end of the day.", "Priya reviews at most four PRs a day.",
     "Priya does her reviews first thing in the morning."),
    # a price for a price: "at $20" is no clock time, as "at 9" would be
    ("Sales raised the Team plan price to $25 per month.", "The Team plan includes a 30-day free trial.",
     "The Team plan is priced at $20 per month."),
])
def test_of_the_memories_a_change_may_replace_it_takes_one_whose_value_is_of_its_kind(change, nearer, farther):
    docs = [yourmemory.parse(text) for text in (change, nearer, farther)]
    candidates = [(1, nearer, lambda: docs[1]), (2, farther, lambda: docs[2])]
    assert yourmemory._likeliest_replaced(docs[0], candidates) == (2, farther)


@pytest.mark.parametrize("old, new", [
    ("We replaced Mailgun with Postmark for receipts.", "Receipts now go out through Resend."),
    ("We replaced Jenkins with Buildkite for release builds.", "Release builds now run on GitHub Actions."),
])
def test_what_an_older_text_says_was_replaced_is_none_of_its_values(memory, old, new):
    """Its value is the name that replaced it (Postmark), which is alike the new one (Resend); with the replaced
    name (Mailgun) beside it, the two names were compared as one value and were not."""
    assert memory._values_alike(yourmemory.parse(old), yourmemory.parse(new))


def test_an_older_memory_is_compared_from_its_stored_parse_not_parsed_again(memory, parses):
    old = memory.store("We deploy the API on Heroku")
    new = memory.store("We moved the API deployment to Fly.io")
    assert new["action"] == "supersede" and new["supersededId"] == old["id"]
    assert parses == ["We deploy the API on Heroku", "We moved the API deployment to Fly.io"], \
        "each text parsed once, when it was stored"


@pytest.mark.parametrize("record", [
    None,  # a memory stored before parses were kept (schema 7)
    b"x\x9c not zlib",  # damaged
    zlib.compress(b"{not json"),  # damaged inside
    zlib.compress(b'{"model":"en_core_web_sm-1.0.0","tokens":[]}'),  # another spaCy model's
    "another text",  # a record of another text
])
def test_an_older_memory_without_a_usable_parse_is_parsed_once_and_its_parse_kept(memory, parses, record):
    old = memory.store("We deploy the API on Heroku")
    if record == "another text":
        record = yourmemory.parse_record(yourmemory.parse("We host the API on Render"))
    memory.db.execute("UPDATE memories SET parse = ? WHERE id = ?", (record, old["id"]))
    parses.clear()
    new = memory.store("We moved the API deployment to Fly.io")
    assert new["action"] == "supersede" and new["supersededId"] == old["id"]
    assert "We deploy the API on Heroku" in parses
    kept = memory.db.execute("SELECT parse FROM memories WHERE id = ?", (old["id"],)).fetchone()[0]
    assert yourmemory.rebuilt("We deploy the API on Heroku", kept) is not None


@pytest.mark.parametrize("old, new, span", [
    ("Standup is at 9:30 every day", "Standup is at 10:00 every day", (["9:30"], ["10:00"])),
    ("Postgres is our main database", "MySQL is our main database", (["Postgres"], ["MySQL"])),
    ("Our main database is Postgres.", "Our main database is MySQL 8.", (["Postgres"], ["MySQL", "8"])),
    ("the cat saw the cat", "the cat saw the dog", (["cat"], ["dog"])),  # a word repeated at both ends
    ("a b a", "a c a", (["b"], ["c"])),
    ("We use one two three four now", "We use five six seven eight now", (["one", "two", "three", "four"],
                                                                          ["five", "six", "seven", "eight"])),
    ("We use one two three four five now", "We use six seven eight nine ten now", None),  # too long a change
    ("Standup is at 9:30", "Standup is at 9:30 sharp", None),  # only an addition
    ("Standup is at 9:30", "standup is at 9:30!", None),  # no change at all
    ("Standup is at 9:30 on Monday", "Standup is at 10:00 on Friday", None),  # two changes
])
def test_a_word_for_word_change_is_one_short_span(old, new, span):
    """The word-for-word rule's first step, from the tokenizer's words alone (punctuation and case left aside)."""
    found = yourmemory.changed_span(yourmemory.words(old), yourmemory.words(new))
    assert (found if found is None else tuple([t.text for t in side] for side in found)) == span


def store_pair_texts() -> list[str]:
    """Every text of the store-pair benchmark's held-out file, sorted: real statements to parse."""
    pairs = json.loads((ROOT / "benchmarks" / "store_pairs_holdout.json").read_text(encoding="utf-8"))
    return sorted({text for group in pairs.values() for pair in group for text in pair})


PARSE_EVERY_TEXT = """
import json, sys, hashlib, yourmemory
if sys.argv[1] == "one thread":
    yourmemory.set_openblas_threads(1)  # as `serve` and `import` do
texts = json.load(sys.stdin)
print(json.dumps({"blis": yourmemory.nlp().get_pipe("tok2vec").model.ops.use_blis,
                  "parses": [hashlib.sha256(yourmemory.parse_record(yourmemory.parse(t))).hexdigest() for t in texts]}))
"""


def test_a_text_parses_the_same_through_numpys_openblas_as_through_spacys_blis():
    """The server parses through numpy's OpenBLAS on one thread, a library by default through spaCy's blis. A
    stored parse must not depend on which (the rules would read two grammars of one text): every text of the
    store-pair benchmark, parsed both ways in two processes, gives the same record."""
    if yourmemory.openblas_threads() is None:
        pytest.skip("no OpenBLAS bundled with this numpy: its stores always parse through blis")
    texts = store_pair_texts()
    assert len(texts) > 200
    env = {key: value for key, value in os.environ.items() if key not in yourmemory.BLAS_THREAD_VARIABLES}
    runs = {way: json.loads(subprocess.run([sys.executable, "-c", PARSE_EVERY_TEXT, way], input=json.dumps(texts),
                                           env=env, capture_output=True, text=True, timeout=600, check=True).stdout)
            for way in ("one thread", "as numpy starts")}
    if not runs["as numpy starts"]["blis"]:
        pytest.skip("numpy's OpenBLAS starts with one thread here (one core): both ways are the same")
    assert not runs["one thread"]["blis"]
    differ = [text for text, a, b in zip(texts, runs["one thread"]["parses"], runs["as numpy starts"]["parses"])
              if a != b]
    assert not differ, f"{len(differ)} texts parse differently, first: {differ[0]!r}"


TRICKY_TEXTS = [  # the attribute ruler's two-token and pattern rules, spaces, a one-token text
    "We're gonna ship it, y'all; there is nothin' left and it ain't broken.", "C'mon, let's go! Gotta run.",
    "Those  tests\n\nthat Ana wrote   pass.", "Yes", "I'd say the API is down since 9:30 on 2024-05-01.",
    "We gonna", "Thanks, y'all", "Well, c'mon", "So let's", "there is"]  # two-token rules ending the text


@pytest.fixture
def pipeline():
    pipeline = yourmemory.nlp()
    yield pipeline
    assert yourmemory.use_faster_parse_steps(pipeline)  # as the pipeline loads


def test_a_text_parses_the_same_through_the_direct_steps_as_through_spacys(pipeline):
    """tok2vec and the attribute ruler run their direct versions (``use_faster_parse_steps``): every text of
    the store-pair benchmark, and some the rules single out, parse to the same bits both ways."""
    texts = store_pair_texts() + TRICKY_TEXTS
    assert len(texts) > 200
    parses = {}
    for on in (False, True):
        assert yourmemory.use_faster_parse_steps(pipeline, on) is on
        parses[on] = [yourmemory._parse_attributes(pipeline(text)) for text in texts]
    differ = [text for text, spacys, direct in zip(texts, parses[False], parses[True]) if spacys != direct]
    assert not differ, f"{len(differ)} texts parse differently, first: {differ[0]!r}"


def test_the_lemmatizer_looks_candidate_forms_up_in_sets_and_finds_spacys_lemmas(pipeline):
    """spaCy's rule lemmatizer asks whether each candidate form of a new plural or inflected word is in a word
    list of up to 57,528 entries, reading it through; the direct version asks the same of sets."""
    lemmatizer = pipeline.get_pipe("lemmatizer")
    direct = vars(lemmatizer)["lemmatize"]
    assert direct != lemmatizer.rule_lemmatize
    assert all(isinstance(words, frozenset) for words in direct.args[0].lookups.get_table("lemma_index").values())
    text = ("The auditors reviewed the quarterly invoices, the couriers shipped the parcels, and the mechanics "
            "fixed the buses' brakes while the children watched ducks crossing the meadows")
    lemmas = {}
    for on in (False, True):
        yourmemory.use_faster_parse_steps(pipeline, on)
        lemmas[on] = [token.lemma_ for token in pipeline(text)]
    assert lemmas[True] == lemmas[False]
    assert {"auditor", "invoice", "courier", "ship", "parcel", "bus", "child", "duck", "meadow"} <= set(lemmas[True])


def test_a_direct_step_that_disagrees_with_spacys_is_not_used(pipeline, monkeypatch):
    spacys = yourmemory._direct_tok2vec

    def off_by_a_little(pipe):
        predict = spacys(pipe)
        return lambda docs: [rows + 1e-6 for rows in predict(docs)]
    with monkeypatch.context() as patch:  # undone before the fixture puts the real steps back
        patch.setattr(yourmemory, "_direct_tok2vec", off_by_a_little)
        assert not yourmemory.use_faster_parse_steps(pipeline)
    assert "predict" not in vars(pipeline.get_pipe("tok2vec"))
    assert "match" in vars(pipeline.get_pipe("attribute_ruler"))  # the other step still agrees


def test_a_direct_step_that_fails_on_the_probe_is_not_used(pipeline, monkeypatch):
    def failing(pipe):
        def predict(docs):
            raise IndexError("a layer this version does not have")
        return predict
    with monkeypatch.context() as patch:
        patch.setattr(yourmemory, "_direct_tok2vec", failing)
        assert not yourmemory.use_faster_parse_steps(pipeline)  # the pipeline still loads, with spaCy's step
    assert "predict" not in vars(pipeline.get_pipe("tok2vec"))


def test_a_model_of_another_shape_keeps_spacys_steps(pipeline, monkeypatch):
    def another_shape(pipe):
        raise ValueError("not the small pipeline's tok2vec")
    with monkeypatch.context() as patch:
        patch.setattr(yourmemory, "_direct_tok2vec", another_shape)
        patch.setattr(yourmemory, "_indexed_rules", another_shape)
        assert not yourmemory.use_faster_parse_steps(pipeline)
    assert not {"predict", "match"} & (set(vars(pipeline.get_pipe("tok2vec")))
                                       | set(vars(pipeline.get_pipe("attribute_ruler"))))
    assert yourmemory.parse_record(pipeline("The worker moved to Python 3.11"))  # spaCy's own steps still parse


def test_a_near_identical_statement_with_another_value_supersedes_unannounced(memory):
    first = memory.store("The nightly build starts at 02:00")
    second = memory.store("The nightly build kicks off at 03:30")
    assert second["action"] == "supersede" and second["supersededId"] == first["id"], second


@pytest.mark.parametrize("old, new", [
    ("The user's sister lives in Porto.", "The user's sister is based in Braga."),  # cosine 0.73
    ("The web app was upgraded to Node 20.", "The web app targets Node 22."),  # 0.70; the old text a done change
    ("The monthly all-hands is on the first Thursday.", "The monthly all-hands happens on the last Tuesday."),
])
def test_a_less_similar_restatement_supersedes_when_its_value_is_of_the_same_kind(memory, old, new):
    """Below the near-identical restatement's cosine (0.8), the values the two texts do not share, embedded
    alone, must be alike: two cities, two days."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("new, alike, model_calls", [
    ("The office moved to the Wharf Building on Quay Street.", True, 1),  # four words: one value
    ("The office moved to the glass Wharf Building on Quay Street.", False, 0),  # five: no one value
    ("The office moved to the tall glass Wharf Building on Quay Street.", False, 0),
])
def test_values_are_compared_by_the_model_only_up_to_four_words(memory, new, alike, model_calls):
    """The value test embeds the words two texts do not share; more than ``MAX_CHANGED_TOKENS`` on a side are
    not one value (as for the word-for-word rule), so they are not alike, and no model call is spent on them."""
    calls = []
    embed = memory.embedder.embed
    memory.embedder.embed = lambda texts: calls.append(list(texts)) or embed(texts)
    old_doc, new_doc = yourmemory.parse("The company's office is at 12 Canal Road."), yourmemory.parse(new)
    assert memory._values_alike(old_doc, new_doc) is alike
    assert len(calls) == model_calls, calls


@pytest.mark.parametrize("old, new", [
    ("Eli lives in Chicago", "Eli is in Portland these days"),
    ("Ruth lives in Dublin.", "Ruth has moved to Cork."),
    ("Marta works at Atlassian.", "Marta now works at Canva."),  # names the model sets apart (0.18) in one slot
    ("Marta works at Atlassian", "Marta now works at Goldman Sachs Asset Management International"),  # five words
    ("Marco reports to Elena", "Marco now reports to Javier"),  # "Javier" read as a common noun
])
def test_an_announced_change_with_no_word_in_common_supersedes_when_its_value_is_of_the_same_kind(memory, old, new):
    """The same person, a change said ("these days", "moved"), and two cities, or two names taken through the
    same preposition: no topic word is shared."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("The security audit is scheduled for the week of September 8.",
     "The auditors moved the security audit to October 6."),  # cosine 0.41
    ("The user's phone is a Pixel 7.", "The user upgraded to an iPhone 15."),  # 0.44
    ("Project Beacon uses MongoDB.", "Beacon moved off MongoDB to DynamoDB."),  # "Project" is the subject's, no value
])
def test_a_less_similar_announced_change_supersedes_when_its_value_is_of_the_same_kind(memory, old, new):
    """Below the cosine that an announced change needs (0.45), down to 0.4, the values the two texts do not
    share must be alike too: two dates, two phones; two databases, the subject's own words left out."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Errors from the mobile app are grouped by release.", "We switched error tracking to Rollbar."),  # 0.43
    ("Feature branches are named after the ticket.", "We renamed the default git branch to main."),  # 0.44
    ("The user's preferred language for replies is English.",
     "The user switched their phone's language to Spanish."),  # 0.43; two subjects, so their words are values
])
def test_a_less_similar_announced_change_with_values_of_another_kind_supersedes_nothing(memory, old, new):
    """A change word and a shared topic word ("error", "branch") are enough from 0.45, not below it."""
    first = memory.store(old)
    second = memory.store(new)
    assert second["action"] == "store", second
    assert memory.get(first["id"])["status"] == "active"


@pytest.mark.parametrize("old, new", [
    ("The user speaks French.", "The user is now learning German."),
    ("The user enjoys reading sci-fi, especially The Expanse.", "The user is now reading a lot of fantasy."),
    ("The summary email should include open pull requests.",
     "The user asked to get the summary email weekly, on Mondays, instead."),  # a bare "instead" ends nothing here
    ("Our app integrates with Slack.", "Our app now integrates with Microsoft Teams."),
    # joining one more: a club, a friend, a hire
    ("Lukas is a member of the local chess club.", "Lukas joined a hiking club last spring."),
    ("Anna's friends include Becca from work.", "Anna became friends with her neighbor Lukas."),
    ("Rosa's team includes a data engineer named Finn.", "Rosa's team hired a new designer, Lena."),
])
def test_an_announced_value_of_a_relation_of_several_values_adds_one(memory, old, new):
    """One speaks several languages and learns more; "now" with another verb announces one more."""
    first = memory.store(old)
    second = memory.store(new)
    assert second["action"] == "store", second
    assert memory.get(first["id"])["status"] == "active"


@pytest.mark.parametrize("old, new", [
    ("The user plays tennis on weekends.", "The user switched from tennis to padel."),
    ("The user attends the Tuesday evening yoga class.", "The user moved to the Thursday morning yoga class."),
    ("Our CI includes flake8.", "We replaced flake8 with Ruff."),
    ("Our CI pipeline includes mypy for type checking.", "Our CI now uses Pyright instead of mypy for type checking."),
    ("The user plays tennis on weekends.", "The user no longer plays tennis; padel is their weekend sport now."),
    ("Emma is a member of the Sierra Club.", "Emma let her Sierra Club membership lapse and joined Greenpeace instead."),
    ("The app supports English.", "The app now supports Spanish instead of English."),  # a verb of several values
])
def test_a_relation_of_several_values_changes_when_the_change_is_said(memory, old, new):
    """A change verb (one that joins, with "instead"), "no longer" or a named replaced value ends the old value."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Our marketing emails go through Mailchimp.", "We moved transactional email to Postmark."),
    ("The user's work phone is an iPhone 13.", "The user switched their personal phone to a Pixel 8."),
    ("The marketing team's standup is at 9:30.", "The sales team moved its standup to 10:00."),
    ("The user's savings account is at Chase.", "The user moved their checking account to Ally."),
    ("Our EU servers are in Frankfurt.", "We moved the US servers to Oregon."),
    ("The Android app's crash reports go to Crashlytics.", "The iOS app moved crash reporting to Sentry."),
    ("Our staging cluster is in us-east-1.", "We moved the dev cluster to eu-west-1."),  # "we" owning both
])
def test_an_announced_change_of_another_thing_of_the_same_kind_supersedes_nothing(memory, old, new):
    """The same noun with rival marks in the old subject and in what the new text changes is two things."""
    first = memory.store(old)
    second = memory.store(new)
    assert second["action"] == "store", second
    assert memory.get(first["id"])["status"] == "active"


@pytest.mark.parametrize("old, new", [
    ("The spare house key is under the flower pot.", "The spare key now lives in the lockbox by the garage."),
    ("Frida's favorite tea is Earl Grey.", "Frida's go-to tea these days is genmaicha."),  # preference, no mark
    ("The home Wi-Fi password is bluefalcon22.", "The user changed the WiFi password to greenotter71."),
    ("The front-end build uses Webpack.", "We switched the frontend build to Vite."),  # one mark, spelled two ways
])
def test_an_announced_change_of_the_same_thing_named_shorter_supersedes(memory, old, new):
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Dana is a senior engineer.", "Dana joined Meta."),  # a job title, an employer
    ("Ruth lives in Dublin.", "Ruth's son has moved to Cork."),  # the same owner, not the same person
    ("Ruth's sister lives in Dublin.", "Ruth now lives in Cork."),
    ("Maria's office is in Berlin.", "Maria now lives in Potsdam."),
    ("Ana lives in Madrid.", "Ana now commutes to London."),  # another relation: commuting is not living
    ("Maria lives in Barcelona.", "Maria was raised in Madrid."),  # an origin, not a change
    ("My sister lives in Boston.", "My brother just moved to Denver."),  # two people of one owner
    ("My mother lives in Seoul.", "My father moved to Busan."),
    ("Our main Postgres cluster is in us-east-1.", "Our Redis cache moved to us-west-2."),  # two things of ours
])
def test_an_announced_change_of_another_kind_of_value_or_person_supersedes_nothing(memory, old, new):
    """Two cities each time (or a job and an employer): the values alone do not make one fact."""
    first = memory.store(old)
    second = memory.store(new)
    assert second["action"] == "store", second
    assert memory.get(first["id"])["status"] == "active"


@pytest.mark.parametrize("old, new", [
    ("Priya lives in Bangalore.", "Priya moved to Google."),
    ("Priya lives in Bangalore.", "Priya moved to Google last month."),
    ("Priya lives in Bangalore.", "Priya moved from Infosys to Google."),  # what she left is no home either
    ("Amara moved to Leeds.", "Amara lives in York."),  # Leeds might have been a company too
])
def test_a_move_to_a_name_replaces_no_home(memory, old, new):
    """One moves to a city, a company, a team or a tool, and the small model does not tell a city's name from a
    company's: "moved to" a name replaces a home only when it names the home it left. Recall still ranks the
    newer text first for "Where does Priya live?" if it answers that; the older one stays, beneath it."""
    assert_keeps(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("Sam lives in Austin.", "Sam doesn't live in Dallas anymore."),  # a denial of another value
    ("Sam lives in Austin.", "Sam no longer lives in Dallas."),
    ("The user is vegetarian.", "The user is considering going vegan."),  # a wish or a plan, no value yet
    ("The app uses React 17.", "We want to upgrade the app to React 18 next quarter."),
    ("Kenji is a backend engineer.", "Kenji hopes to become an engineering manager."),  # "hopes": lemma "hop"
])
def test_a_denial_or_a_plan_replaces_no_value(memory, old, new):
    """Found by a helper's blind probe of 154 pairs: each of these hid a true fact."""
    assert_keeps(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("The API is on Node 20.", "The API requires Node 18 or later."),
    ("The API runs on Node 20.", "The API requires Node 18 or later."),
])
def test_a_bound_does_not_restate_a_value(memory, old, new):
    """What a thing needs at least is another fact than what it runs (the version and amount rules already
    said so; the restatement rule did not)."""
    assert_keeps(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("The partner API will be a REST API.", "The partner API will require signed requests."),  # values unalike
    ("I live in Lyon.", "I grew up in Nantes."),  # two cities, but the new text tells the past
    ("I grew up in Nantes.", "I live in Lyon."),  # ... or the old one
    ("Maria lives in Barcelona.", "Maria was born in Madrid."),
    ("Maria was born in Madrid.", "Maria lives in Barcelona."),
    ("The user's son is allergic to peanuts.", "The user's son has a shellfish allergy."),  # several at once
    ("The user's daughter plays the violin.", "The user's daughter is learning the cello."),
    ("The user likes Thai food.", "The user likes Mexican food."),  # tastes add up
    ("Maria lives in Lisbon.", "Maria now works in Porto."),  # another relation: where she works
    ("Lena lives in Vienna.", "Lena is staying in Graz these days while her flat is renovated."),
    ("Ben lives in Austin.", "Ben has moved his company's office to Dallas."),  # his office moved, not Ben
])
def test_a_less_similar_statement_of_another_kind_time_or_relation_supersedes_nothing(memory, old, new):
    """Each of these passes the subject and value tests and most have values of one kind; what they tell is
    another kind of value, a past or an origin, a relation of several values, or another relation."""
    first = memory.store(old)
    second = memory.store(new)
    assert second["action"] == "store", second
    assert memory.get(first["id"])["status"] == "active"


@pytest.mark.parametrize("old, new", [
    ("We use Jenkins for CI.", "We run CI on GitHub Actions."),  # 0.82: "we" say one relation in other verbs
    ("Leo lives in Madrid.", "Leo resides in Seville."),  # "reside" states where, as "be based in" does
])
def test_a_near_identical_restatement_in_another_verb_supersedes(memory, old, new):
    assert_replaces(memory, old, new)


def test_a_persons_other_relation_supersedes_nothing_even_said_alike(memory):
    """Cosine 0.815, above the near-identical restatement's 0.8: where Maria works is not where she lives."""
    lives = memory.store("Maria lives in Lisbon.")
    works = memory.store("Maria works in Porto.")
    assert works["action"] == "store", works
    assert memory.get(lives["id"])["status"] == "active"


@pytest.mark.parametrize("old, new", [
    ("svc-gamma runs on port 8003", "svc-gamma runs on port 9003"),
    ("The staging-db backup runs at 02:00", "The staging-db backup runs at 04:00"),
    ("Current nightly backup runs at 02:00", "New nightly backup runs at 04:00"),  # newness is no mark
])
def test_a_sentence_read_as_a_noun_phrase_still_takes_a_new_value(memory, old, new):
    """The small model reads "runs" as a noun here; the same words before it are the same subject."""
    assert_replaces(memory, old, new)


@pytest.mark.parametrize("old, new", [
    ("The Q1 travel budget is $10k", "The Q1 travel budget has not been set yet"),  # no change is made
    ("The web server listens on port 3000", "The API server moved to port 8080"),  # another server
    ("The dashboard uses React Router for navigation", "We upgraded the dashboard to React 18"),  # a version
    ("The dashboard uses React Router for navigation", "The dashboard uses React 18"),  # is not a router
    ("Ana works at Google", "Ana works at night"),  # when she works is not where (cosine 0.62, word for word)
])
def test_a_denied_change_or_a_value_of_another_kind_supersedes_nothing(memory, old, new):
    memory.store(old)
    assert memory.store(new)["action"] == "store"
    assert memory.stats()["memories"]["active"] == 2


@pytest.mark.parametrize("old, new", [
    ("Bob's editor is Emacs", "Alice switched her editor to Neovim"),
    ("Caroline: I live in Boston", "Melanie: I moved to Denver last spring"),
    ("We use Jenkins for CI", "We now cache Docker layers in CI"),
    ("Nadia is based in Lisbon", "We moved Nadia's desk to the window"),  # she is named, not her fact
    ("Bob's editor is Emacs", "Alice replaced Emacs with Neovim as her editor"),  # names Bob's value, not his fact
])
def test_a_change_of_someone_else_or_of_another_value_supersedes_nothing(memory, old, new):
    memory.store(old)
    assert memory.store(new)["action"] == "store"
    assert memory.stats()["memories"]["active"] == 2


@pytest.mark.parametrize("old, new", [
    ("The changelog lives in CHANGES.md", "The changelog is published with every release"),  # a routine
    ("Dana is vegetarian", "Dana is allergic to cashews"),  # another relation
    ("Omar works at the Red Cross", "Omar works in disaster logistics"),  # "at" an employer, "in" a field
    ("The billing service tags every error with the invoice ID",  # what it replaced is not in the old text
     "Billing errors go to Rollbar instead of Sentry since the audit"),
    ("Priya Shah's team uses Jira for tickets", "Priya Patel's team moved its tickets to Linear"),  # two Priyas
    ("Acme Corp's office is in Boston", "Acme Labs moved its office to Austin"),  # two companies
    ("The Q3 cloud budget is $40k.", "The Q4 cloud budget is $55k."),  # two budgets that share a mark
    # Two releases: the parse makes "Version" the subject of one and "1.5.0" of the other.
    ("Version 1.4.0 shipped on March 3", "Version 1.5.0 shipped on March 17"),
    ("Orion v1.4.0 was released on March 3", "Orion v1.5.0 was released on March 17"),
    # Two services, two backups: the small model reads "runs" as a noun, so neither sentence has a subject.
    ("svc-gamma runs on port 8003", "svc-delta runs on port 8004"),
    ("The staging-db backup runs at 02:00", "The prod-db backup runs at 03:00"),
    # The same noun, other words before it (the small model reads "refresh token" as adjectives, "access" as
    # the subject): another lifetime, another host.
    ("The JWT access token lifetime is 15 minutes.", "The refresh token lifetime is now 14 days."),
    ("The production Redis host is redis-prod.lumen.internal.",
     "The production database host is now db-prod-b.lumen.internal."),
    # What someone now holds is a fact about the thing held, not a new value of what the person is.
    ("Marco Rossi is the backend lead.", "Marco Rossi now owns the billing module."),
    ("Aisha Khan is the DevOps engineer on the platform team.", "Aisha Khan now owns the infrastructure code."),
])
def test_a_routine_another_relation_or_a_change_of_something_unmentioned_supersedes_nothing(memory, old, new):
    memory.store(old)
    assert memory.store(new)["action"] == "store"
    assert memory.stats()["memories"]["active"] == 2


@pytest.mark.parametrize("old, new", [
    ("Caroline: I went to the pottery class yesterday", "Caroline: I went to the yoga class yesterday"),
    ("The user loves hiking", "The user loves painting"),
    ("The user prefers tabs for indentation", "The user does not prefer tabs for indentation anymore"),
    ("We use React for the frontend", "We use Postgres for the database"),
    # Subjects told apart by a prepositional phrase ("leaves" is a change verb; the small model even misreads
    # the first sentence as a noun phrase).
    ("The flight to Tokyo leaves at 7am", "The flight to Osaka leaves at 9pm"),
    ("The meeting on Monday is at 10am", "The meeting on Friday is at 3pm"),
])
def test_different_facts_are_neither_merged_nor_superseded(memory, old, new):
    memory.store(old)
    assert memory.store(new)["action"] == "store"
    assert memory.stats()["memories"]["active"] == 2


def test_related_memories_are_linked_with_similarity_times_verb_weight(memory):
    a = memory.store("The deploy script fails when the VPN is down")
    b = memory.store("The deploy script fails without a VPN connection")
    edges = memory.db.execute("SELECT source_id, target_id, weight, relation FROM memory_edges").fetchall()
    assert {(s, t) for s, t, _, _ in edges} == {(a["id"], b["id"]), (b["id"], a["id"])}
    similarity = memory.db.execute(
        """SELECT 1 - vec_distance_cosine(x.embedding, y.embedding) FROM memory_vectors x, memory_vectors y
           WHERE x.memory_id = ? AND y.memory_id = ?""", (a["id"], b["id"])).fetchone()[0]
    relation = edges[0][3]
    assert relation == "fail"
    assert edges[0][2] == pytest.approx(similarity * yourmemory.VERB_WEIGHTS["fail"], abs=1e-4)


def test_unrelated_memories_are_not_linked(memory):
    memory.store("The office coffee machine is broken")
    memory.store("Quarterly taxes are due on the fifteenth")
    assert count_rows(memory, "memory_edges") == 0


def test_update_replaces_text_re_embeds_and_keeps_history(memory, clock):
    stored = memory.store("The cache TTL is 60 seconds", importance=0.5)
    clock.advance(days=1)
    updated = memory.update(stored["id"], "The cache TTL is 300 seconds after the incident", importance=0.9)
    assert updated["previousContent"] == "The cache TTL is 60 seconds"
    row = memory.get(stored["id"])
    assert row["content"].endswith("after the incident") and row["importance"] == 0.9
    assert [h["content"] for h in row["history"]] == ["The cache TTL is 60 seconds"]
    assert memory.recall("incident cache TTL", top_k=1)["memories"][0]["id"] == stored["id"]
    assert memory.db.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH '60'").fetchone()[0] == 0


def test_update_and_forget_reject_unknown_and_foreign_ids(memory, db_path, clock, embedder):
    with pytest.raises(NotFound, match="memory_id"):
        memory.update(999, "anything")
    with pytest.raises(NotFound, match="memory_id"):
        memory.forget(999)
    stored = memory.store("Ada's deploy key lives in the vault")
    with pytest.raises(NotFound):
        memory.forget(stored["id"], user_id="mallory")
    with pytest.raises(InvalidInput, match="new_content"):
        memory.update(stored["id"], "")
    assert memory.get(stored["id"])["content"] == "Ada's deploy key lives in the vault"


def test_forget_deletes_the_memory_everywhere(memory):
    a = memory.store("The deploy script fails when the VPN is down")
    memory.store("The deploy script fails without a VPN connection")
    memory.forget(a["id"])
    for table, column in (("memories", "id"), ("memory_vectors", "memory_id"), ("memory_edges", "source_id"),
                          ("memory_edges", "target_id")):
        assert memory.db.execute(f"SELECT count(*) FROM {table} WHERE {column} = ?", (a["id"],)).fetchone()[0] == 0
    assert memory.db.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH 'vpn'").fetchone()[0] == 1
    with pytest.raises(NotFound):
        memory.forget(a["id"])


def test_a_knowledge_graph_observation_is_changed_only_through_the_graph_tools(memory):
    memory.graph.create_entities([{"name": "Ada", "entityType": "person", "observations": ["Ada writes Rust"]}])
    observation = memory.db.execute("SELECT memory_id FROM observations").fetchone()[0]
    for change in (lambda: memory.update(observation, "Ada writes Go"), lambda: memory.forget(observation)):
        with pytest.raises(InvalidInput, match="memory_id: .*observation"):
            change()
    assert memory.graph.open_nodes(["Ada"])["entities"][0]["observations"] == ["Ada writes Rust"]
    assert memory.store("Ada writes Rust")["action"] == "store", "a stored memory never merges into an observation"


def test_a_forgotten_memorys_id_is_never_given_to_another(memory):
    first = memory.store("The staging database password rotates every 90 days")["id"]
    memory.forget(first)
    observation = memory.graph.create_entities([{"name": "Ada", "entityType": "person",
                                                 "observations": ["Ada owns the staging database"]}])
    second = memory.store("Deploy previews expire after seven days")["id"]
    used = [row[0] for row in memory.db.execute("SELECT id FROM memories")]
    assert observation and first not in used and second > first
    with pytest.raises(yourmemory.NotFound):
        memory.forget(first)


def test_forgetting_a_memory_brings_back_what_it_had_superseded(memory, clock):
    """Forget the newer value and the older one is the last known again, not hidden for good."""
    old = memory.store("The project database is Postgres 15")
    new = memory.store("The project database is Postgres 16")
    assert new["action"] == "supersede" and new["supersededId"] == old["id"]
    clock.advance(days=2)
    forgotten = memory.forget(new["id"])
    assert forgotten["restored"] == [old["id"]] and "active again" in forgotten["message"]
    back = memory.get(old["id"])
    assert back["status"] == "active" and back["superseded_by"] is None
    assert back["history"][-1]["reason"] == "restored"
    assert [m["id"] for m in memory.recall("Which database does the project use?", top_k=1)["memories"]] == [old["id"]]
    assert memory.update(old["id"], "The project database is Postgres 17")["id"] == old["id"]
    assert memory.audit(memory_id=old["id"], limit=5)[1]["action"] == "restore"
    assert memory.doctor()["ok"]


def test_forgetting_a_memory_in_the_middle_of_a_chain_hands_its_predecessor_on(memory):
    first = memory.store("The project database is Postgres 14")
    second = memory.store("The project database is Postgres 15")
    third = memory.store("The project database is Postgres 16")
    assert (second["supersededId"], third["supersededId"]) == (first["id"], second["id"])
    assert memory.forget(second["id"])["restored"] == []
    kept = memory.get(first["id"])
    assert kept["status"] == "superseded" and kept["superseded_by"] == third["id"]


def test_update_refuses_a_question_as_it_refuses_to_store_one(memory):
    kept = memory.store("Ada works at Acme")
    with pytest.raises(InvalidInput, match="new_content: this is a question"):
        memory.update(kept["id"], "Where does Ada work?")
    assert memory.get(kept["id"])["content"] == "Ada works at Acme"


def test_a_wrongly_superseded_memory_can_be_restored_beside_its_successor(memory):
    """A store that took another fact for a new value hides the older memory; restore brings it back,
    and both are recalled."""
    first = memory.store("The project database is Postgres 15")
    second = memory.store("The project database is Postgres 16")
    assert second["action"] == "supersede" and second["supersededId"] == first["id"]
    restored = memory.restore(first["id"])
    assert restored["memory"]["status"] == "active" and restored["memory"]["superseded_by"] is None
    assert memory.get(second["id"])["status"] == "active"
    recalled = {m["id"] for m in memory.recall("Which Postgres version is the project database?", top_k=5)["memories"]}
    assert {first["id"], second["id"]} <= recalled
    assert memory.audit(memory_id=first["id"])[0]["detail"] == f"was superseded by memory {second['id']}"


class ListEmbedder:
    """The real model behind a library user's embedder that returns plain lists of unscaled vectors."""

    def __init__(self, model):
        self.model = model

    def embed(self, texts):
        return [[2.0 * value for value in vector] for vector in self.model.embed(texts).tolist()]

    def embed_one(self, text):
        return self.embed([text])[0]


@pytest.mark.parametrize("old, new, action", [
    ("Ruth lives in Dublin.", "Ruth has moved to Cork.", "supersede"),  # values alike: 0.65
    ("The partner API will be a REST API.", "The partner API will require signed requests.", "store"),  # 0.30
])
def test_the_value_test_takes_an_embedder_that_returns_lists_of_any_length(db_path, clock, embedder, old, new,
                                                                           action):
    with YourMemory(db_path, user="ada", clock=clock, embedder=ListEmbedder(embedder)) as memory:
        memory.store(old)
        assert memory.store(new)["action"] == action
