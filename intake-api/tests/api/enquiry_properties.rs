//! Properties of `parse_enquiry` over generated bodies (spec 2.2): every enquiry the spec allows
//! is accepted, and a valid enquiry broken by exactly one rule is refused on that field alone.
//!
//! The allowed values come from the domain's lists, whose names a unit test in
//! `domain::choices` pins to the spec, so a renamed variant fails there.

use chrono::{Duration, NaiveDate};
use intake_api::domain::{
    ApplicationType, CreditIssue, EmploymentStatus, MortgagePurpose, MortgageScheme,
    PURCHASE_FIELDS, PurchaseType, Purpose, REMORTGAGE_FIELDS, RemortgageReason, Stage,
    parse_enquiry, wire_names,
};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;
use serde_json::{Map, Value, json};
use uuid::Uuid;

const BRANDS: &[&str] = &["brand_a", "brand_b"];

fn brands() -> Vec<String> {
    BRANDS.iter().map(|b| (*b).to_owned()).collect()
}

/// The fields of one purpose or the other: an enquiry of one purpose ignores the other's.
fn purpose_fields() -> impl Iterator<Item = &'static str> {
    PURCHASE_FIELDS.into_iter().chain(REMORTGAGE_FIELDS)
}

/// What kind of JSON value a required field takes, to know what the wrong type is.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Flag,
    Number,
}

const REQUIRED: &[(&str, Kind)] = &[
    ("brand", Kind::Text),
    ("first_name", Kind::Text),
    ("last_name", Kind::Text),
    ("email", Kind::Text),
    ("mobile_number", Kind::Text),
    ("date_of_birth", Kind::Text),
    ("terms_agreement", Kind::Flag),
    ("stage", Kind::Text),
    ("application_type", Kind::Text),
    ("employment_status", Kind::Text),
    ("total_annual_income", Kind::Number),
    ("mortgage_purpose", Kind::Text),
    ("has_credit_issues", Kind::Flag),
];

const ADDRESS_TEXT: &[&str] = &["line_2", "line_3", "town_city", "county", "country"];

fn today() -> NaiveDate {
    NaiveDate::from_ymd_opt(2025, 6, 15).expect("a calendar date")
}

fn parse(body: &Value) -> Result<intake_api::domain::Enquiry, Vec<(String, Vec<String>)>> {
    parse_enquiry(body, BRANDS, today()).map_err(|e| e.into_map().into_iter().collect())
}

fn iso(date: NaiveDate) -> String {
    date.format("%Y-%m-%d").to_string()
}

fn choice(values: Vec<String>) -> impl Strategy<Value = Value> {
    select(values).prop_map(Value::from)
}

/// Surrounding whitespace, which the parser trims.
fn padded(text: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    ("[ \t]{0,2}", text, "[ \t]{0,2}").prop_map(|(l, t, r)| format!("{l}{t}{r}"))
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        9 => padded("[A-Za-zÀ-ÖØ-öø-ÿ][A-Za-zÀ-ÖØ-öø-ÿ' .-]{0,40}"),
        1 => "[a-zé]{255}",
    ]
}

fn email() -> impl Strategy<Value = String> {
    padded("[A-Za-z0-9._%+-]{1,30}@[A-Za-z0-9-]{1,20}(\\.[A-Za-z0-9-]{1,10}){1,3}")
}

fn mobile() -> impl Strategy<Value = String> {
    // Separators may fall anywhere; what counts is 7 to 15 digits after an optional `+`.
    // At most 32 characters as sent.
    "[ ()-]?\\+?([ ()-]?[0-9]){7,15}"
}

fn past_date() -> impl Strategy<Value = NaiveDate> {
    (1i64..=45_000).prop_map(|days| today() - Duration::days(days))
}

/// A non-negative amount, as a JSON integer or float.
fn amount() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(0)),
        (0u64..=5_000_000).prop_map(Value::from),
        (0.0f64..1e9).prop_map(Value::from),
    ]
}

/// An optional field: absent (`None`), or sent as null or a value.
fn optional(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(Value::Null)),
        3 => value.prop_map(Some),
    ]
}

/// An optional text field: as [`optional`], or blank, which also counts as not sent.
fn optional_text(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        3 => optional(value),
        1 => Just(Some(json!("  "))),
    ]
}

/// Values that are wrong for any field, to put where the spec says a field is ignored.
fn garbage() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("castle")),
        Just(json!(-1)),
        Just(json!(true)),
        Just(json!([])),
        Just(json!({"a": 1})),
        Just(json!(["not_a_credit_issue"])),
    ]
}

fn postcode() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Z]{1,2}[0-9][0-9A-Z]? [0-9][A-Z]{2}",
        // At most 16 characters as sent, padding included.
        padded("[A-Za-z0-9][A-Za-z0-9 -]{0,10}[A-Za-z0-9]"),
        "[0-9]{5}",
    ]
}

fn moved_dates() -> impl Strategy<Value = (Option<NaiveDate>, Option<NaiveDate>)> {
    prop_oneof![
        Just((None, None)),
        past_date().prop_map(|d| (Some(d), None)),
        past_date().prop_map(|d| (None, Some(d))),
        (past_date(), 0i64..=10_000)
            .prop_map(|(d, stay)| (Some(d), Some(d + Duration::days(stay)))),
    ]
}

fn address() -> impl Strategy<Value = Value> {
    let text = || padded("[A-Za-z0-9][A-Za-z0-9 ,'.-]{0,30}").prop_map(Value::from);
    (
        padded("[0-9]{1,3} [A-Z][a-z]{2,12} (Street|Road|Lane)"),
        prop::collection::vec(optional_text(text()), ADDRESS_TEXT.len()),
        postcode(),
        moved_dates(),
    )
        .prop_map(
            |(line_1, optional_lines, postcode, (moved_in, moved_out))| {
                let mut a = Map::new();
                a.insert("line_1".into(), line_1.into());
                for (key, value) in ADDRESS_TEXT.iter().zip(optional_lines) {
                    if let Some(value) = value {
                        a.insert((*key).into(), value);
                    }
                }
                a.insert("postcode".into(), postcode.into());
                if let Some(d) = moved_in {
                    a.insert("date_moved_in".into(), iso(d).into());
                }
                if let Some(d) = moved_out {
                    a.insert("date_moved_out".into(), iso(d).into());
                }
                Value::Object(a)
            },
        )
}

/// The purpose and exactly the fields it (and its sub-choice) makes required.
fn mortgage() -> impl Strategy<Value = Map<String, Value>> {
    let purchase = (
        select(wire_names::<PurchaseType>()),
        select(wire_names::<MortgageScheme>()),
        amount(),
        amount(),
    )
        .prop_map(|(purchase_type, scheme, value, deposit)| {
            let mut m = Map::new();
            m.insert("mortgage_purpose".into(), "purchase".into());
            m.insert("purchase_type".into(), purchase_type.clone().into());
            if purchase_type == "first_time_buyer" {
                m.insert("mortgage_scheme".into(), scheme.into());
            }
            m.insert("new_property_value".into(), value);
            m.insert("deposit_amount".into(), deposit);
            m
        });
    let remortgage = (
        select(wire_names::<RemortgageReason>()),
        amount(),
        amount(),
        amount(),
    )
        .prop_map(|(reason, current, outstanding, extra)| {
            let mut m = Map::new();
            m.insert("mortgage_purpose".into(), "remortgage".into());
            m.insert("remortgage_reason".into(), reason.clone().into());
            m.insert("current_property_value".into(), current);
            m.insert("outstanding_mortgage_amount".into(), outstanding);
            match reason.as_str() {
                "borrow_more_money" => m.insert("additional_borrowing_amount".into(), extra),
                "release_money" => m.insert("release_borrowing_amount".into(), extra),
                _ => None,
            };
            m
        });
    prop_oneof![purchase, remortgage]
}

/// Any enquiry spec 2.2 allows, with garbage in the other purpose's fields.
fn valid_enquiry() -> impl Strategy<Value = Value> {
    let applicant = (
        choice(brands()),
        name(),
        name(),
        email(),
        mobile(),
        past_date(),
        choice(wire_names::<Stage>()),
        choice(wire_names::<ApplicationType>()),
        choice(wire_names::<EmploymentStatus>()),
        amount(),
    );
    let credit = prop_oneof![
        Just(None),
        prop::collection::vec(select(wire_names::<CreditIssue>()), 1..=20).prop_map(Some),
    ];
    let extras = (
        optional(any::<u128>().prop_flat_map(|n| {
            let uuid = Uuid::from_u128(n).hyphenated().to_string();
            prop_oneof![Just(uuid.clone()), Just(uuid.to_uppercase())].prop_map(Value::from)
        })),
        optional(any::<bool>().prop_map(Value::from)),
        optional(prop::collection::vec(address(), 1..=6).prop_map(Value::from)),
        prop::collection::vec(prop::option::of(garbage()), purpose_fields().count()),
        prop::option::of("\\PC{0,20}"),
    );
    (applicant, mortgage(), credit, extras).prop_map(|(applicant, mortgage, credit, extras)| {
        let (brand, first, last, email, mobile, born, stage, app_type, employment, income) =
            applicant;
        let (product_uuid, consent, addresses, noise, unknown) = extras;
        let mut body = Map::new();
        let mut put = |key: &str, value: Value| body.insert(key.to_owned(), value);
        put("brand", brand);
        put("first_name", first.into());
        put("last_name", last.into());
        put("email", email.into());
        put("mobile_number", mobile.into());
        put("date_of_birth", iso(born).into());
        put("terms_agreement", true.into());
        put("stage", stage);
        put("application_type", app_type);
        put("employment_status", employment);
        put("total_annual_income", income);
        put("has_credit_issues", credit.is_some().into());
        if let Some(issues) = credit {
            put("credit_issues", issues.into());
        }
        for (key, value) in [
            ("product_uuid", product_uuid),
            ("credit_check_consent", consent),
            ("addresses", addresses),
        ] {
            if let Some(value) = value {
                put(key, value);
            }
        }
        if let Some(text) = unknown {
            put("utm_source", text.into());
        }
        body.extend(mortgage);
        // The other purpose's fields are sent as garbage: they must be ignored. (A conditional
        // field of the body's own purpose is checked whenever it is sent.)
        let others = if body["mortgage_purpose"] == "purchase" {
            REMORTGAGE_FIELDS.as_slice()
        } else {
            PURCHASE_FIELDS.as_slice()
        };
        for (key, noise) in purpose_fields().zip(noise) {
            if let Some(noise) = noise
                && others.contains(&key)
            {
                body.insert(key.into(), noise);
            }
        }
        Value::Object(body)
    })
}

/// The conditional fields this body's own values make required.
fn required_conditionals(body: &Value) -> Vec<&'static str> {
    let mut keys = Vec::new();
    if body["has_credit_issues"] == true {
        keys.push("credit_issues");
    }
    match body["mortgage_purpose"].as_str() {
        Some("purchase") => {
            keys.extend(["purchase_type", "new_property_value", "deposit_amount"]);
            if body["purchase_type"] == "first_time_buyer" {
                keys.push("mortgage_scheme");
            }
        }
        Some("remortgage") => {
            keys.extend([
                "remortgage_reason",
                "current_property_value",
                "outstanding_mortgage_amount",
            ]);
            match body["remortgage_reason"].as_str() {
                Some("borrow_more_money") => keys.push("additional_borrowing_amount"),
                Some("release_money") => keys.push("release_borrowing_amount"),
                _ => {}
            }
        }
        _ => {}
    }
    keys
}

/// A body broken in one way, and the path of the one error it must produce.
type Broken = (Value, String);

fn set(body: &Value, key: &str, value: Option<Value>) -> Value {
    let mut body = body.clone();
    let obj = body.as_object_mut().expect("bodies are objects");
    match value {
        Some(value) => obj.insert(key.to_owned(), value),
        None => obj.remove(key),
    };
    body
}

fn set_in_address(body: &Value, index: usize, key: &str, value: Option<Value>) -> Value {
    let mut body = body.clone();
    let address = body["addresses"][index]
        .as_object_mut()
        .expect("generated addresses are objects");
    match value {
        Some(value) => address.insert(key.to_owned(), value),
        None => address.remove(key),
    };
    body
}

/// The three ways a field goes unsent: absent, null, or blank.
fn unsent() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        Just(Some(json!(" \t ")))
    ]
}

/// Breaks `key` at the top level with a value from `values`.
fn breaking(
    body: &Value,
    key: &'static str,
    values: impl Strategy<Value = Option<Value>> + 'static,
) -> BoxedStrategy<Broken> {
    let body = body.clone();
    values
        .prop_map(move |value| (set(&body, key, value), key.to_owned()))
        .boxed()
}

fn wrong_type(kind: Kind) -> impl Strategy<Value = Value> {
    let values = match kind {
        Kind::Text => vec![
            json!(42),
            json!(1.5),
            json!(true),
            json!(["x"]),
            json!({"x": 1}),
        ],
        Kind::Flag => vec![
            json!("true"),
            json!("false"),
            json!(1),
            json!(0),
            json!([true]),
        ],
        Kind::Number => vec![json!("52000"), json!(true), json!([1]), json!({"n": 1})],
    };
    select(values)
}

/// A non-blank string the field does not allow (compared after trimming, as the parser does).
fn outside(allowed: Vec<String>) -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z_]{1,24}",
        select(allowed.clone()).prop_map(|v| v.to_uppercase()),
        select(allowed.clone()).prop_map(|v| format!("{v}_x")),
    ]
    .prop_filter("must not be an allowed value", move |v| {
        !allowed.iter().any(|a| a == v.trim())
    })
    .prop_map(Value::from)
}

fn negative() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-1e12f64..-0.001).prop_map(Value::from),
        (-1_000_000_000i64..=-1).prop_map(Value::from),
    ]
}

fn malformed_date() -> impl Strategy<Value = Value> {
    let fixed = select(vec![
        "1990-5-17",
        "17/05/1990",
        "1990-02-30",
        "2023-02-29",
        "1990-13-01",
        "1990-05-17T00:00:00Z",
        "19900517",
        "+1990-05-17",
        "0000-00-00",
        "abcd-ef-gh",
    ]);
    let reformatted = (
        past_date(),
        select(vec!["%d/%m/%Y", "%Y/%m/%d", "%d-%m-%Y", "%Y%m%d"]),
    )
        .prop_map(|(d, format)| d.format(format).to_string());
    prop_oneof![fixed.prop_map(str::to_owned), reformatted].prop_map(Value::from)
}

fn bad_email() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z]{1,10}\\.[a-z]{2,5}",
        "[a-z]{1,10}@[a-z]{1,10}@[a-z]{1,10}\\.com",
        "@[a-z]{1,10}\\.com",
        "[a-z]{1,10}@[a-z]{1,10}",
        "[a-z]{1,10}@[a-z]{1,10}\\.\\.com",
        "[a-z]{1,10}@\\.[a-z]{1,10}",
        "[a-z]{1,10}@[a-z]{1,10}\\.",
        "[a-z]{1,5} [a-z]{1,5}@example\\.com",
        "[a-z]{243,260}@example\\.com",
    ]
    .prop_map(Value::from)
}

fn bad_uuid() -> impl Strategy<Value = Value> {
    any::<u128>().prop_flat_map(|n| {
        let uuid = Uuid::from_u128(n);
        let hyphenated = uuid.hyphenated().to_string();
        select(vec![
            Value::from(uuid.simple().to_string()),
            Value::from(uuid.braced().to_string()),
            Value::from(uuid.urn().to_string()),
            Value::from(&hyphenated[..35]),
            Value::from(format!("{}g", &hyphenated[..35])),
            Value::from(hyphenated.replace('-', "0")),
            Value::from("not-a-uuid"),
            json!(123),
            json!(true),
        ])
    })
}

fn bad_mobile() -> impl Strategy<Value = Value> {
    prop_oneof![
        "\\+?[0-9]{1,6}",
        "\\+?[0-9]{16,20}",
        "[0-9]{5,10}[a-z][0-9]{2}",
        "[0-9]{2}\\+[0-9]{9}",
        "\\+\\+[0-9]{10}",
    ]
    .prop_map(Value::from)
}

/// Every single-rule break that applies to `body`, each as a strategy for the broken body.
fn breakages(body: &Value) -> Vec<BoxedStrategy<Broken>> {
    let mut rules = Vec::new();
    for &(key, kind) in REQUIRED {
        rules.push(breaking(body, key, unsent()));
        rules.push(breaking(body, key, wrong_type(kind).prop_map(Some)));
    }
    for (key, allowed) in [
        ("brand", brands()),
        ("stage", wire_names::<Stage>()),
        ("application_type", wire_names::<ApplicationType>()),
        ("employment_status", wire_names::<EmploymentStatus>()),
        ("mortgage_purpose", wire_names::<MortgagePurpose>()),
    ] {
        rules.push(breaking(body, key, outside(allowed).prop_map(Some)));
    }
    let too_long = || "[a-zé]{256,300}".prop_map(|s| Some(Value::from(s)));
    rules.push(breaking(body, "first_name", too_long()));
    rules.push(breaking(body, "last_name", too_long()));
    rules.push(breaking(body, "email", bad_email().prop_map(Some)));
    rules.push(breaking(body, "mobile_number", bad_mobile().prop_map(Some)));
    rules.push(breaking(
        body,
        "date_of_birth",
        malformed_date().prop_map(Some),
    ));
    let not_before_today =
        (0i64..=40_000).prop_map(|days| Some(iso(today() + Duration::days(days)).into()));
    rules.push(breaking(body, "date_of_birth", not_before_today));
    rules.push(breaking(body, "terms_agreement", Just(Some(json!(false)))));
    rules.push(breaking(
        body,
        "total_annual_income",
        negative().prop_map(Some),
    ));
    rules.push(breaking(body, "product_uuid", bad_uuid().prop_map(Some)));
    let not_a_flag = select(vec![json!("yes"), json!(1), json!("true")]).prop_map(Some);
    rules.push(breaking(body, "credit_check_consent", not_a_flag));
    let bad_addresses = select(vec![
        json!([]),
        json!({"line_1": "1 High Street", "postcode": "LS1 1AA"}),
        json!("1 High Street"),
        Value::from(vec![
            json!({"line_1": "1 High Street", "postcode": "LS1 1AA"});
            21
        ]),
    ]);
    rules.push(breaking(body, "addresses", bad_addresses.prop_map(Some)));

    for key in required_conditionals(body) {
        rules.push(breaking(body, key, unsent()));
        match key {
            "credit_issues" => {
                let bad = select(vec![
                    json!([]),
                    json!("ccj"),
                    json!({"0": "ccj"}),
                    Value::from(vec!["ccj"; 21]),
                ]);
                rules.push(breaking(body, key, bad.prop_map(Some)));
                rules.push(bad_credit_issue(body));
            }
            "purchase_type" => rules.push(breaking(
                body,
                key,
                outside(wire_names::<PurchaseType>()).prop_map(Some),
            )),
            "mortgage_scheme" => rules.push(breaking(
                body,
                key,
                outside(wire_names::<MortgageScheme>()).prop_map(Some),
            )),
            "remortgage_reason" => rules.push(breaking(
                body,
                key,
                outside(wire_names::<RemortgageReason>()).prop_map(Some),
            )),
            amount => {
                rules.push(breaking(body, amount, negative().prop_map(Some)));
                rules.push(breaking(
                    body,
                    amount,
                    wrong_type(Kind::Number).prop_map(Some),
                ));
            }
        }
    }

    let addresses = body["addresses"].as_array().map_or(0, Vec::len);
    if addresses > 0 {
        rules.extend(address_breakages(body, addresses));
    }
    rules
}

/// One element of `credit_issues` outside the list, reported at its own index.
fn bad_credit_issue(body: &Value) -> BoxedStrategy<Broken> {
    let body = body.clone();
    let len = body["credit_issues"].as_array().map_or(0, Vec::len);
    let element = prop_oneof![
        outside(wire_names::<CreditIssue>()),
        Just(json!(7)),
        Just(json!(null))
    ];
    (0..len, element)
        .prop_map(move |(i, element)| {
            let mut broken = body.clone();
            broken["credit_issues"][i] = element;
            (broken, format!("credit_issues.{i}"))
        })
        .boxed()
}

fn address_breakages(body: &Value, count: usize) -> Vec<BoxedStrategy<Broken>> {
    // Each rule picks the address it breaks; the path must carry that index.
    let at = |field: &'static str, values: BoxedStrategy<Option<Value>>| {
        let body = body.clone();
        (0..count, values)
            .prop_map(move |(i, value)| {
                let path = format!("addresses.{i}.{field}");
                (set_in_address(&body, i, field, value), path)
            })
            .boxed()
    };
    let too_long_postcode = "[A-Z0-9]{17,30}".prop_map(|s| Some(Value::from(s)));
    let mut rules = vec![
        at("postcode", unsent().boxed()),
        at("postcode", too_long_postcode.boxed()),
        at("postcode", wrong_type(Kind::Text).prop_map(Some).boxed()),
        at("line_1", unsent().boxed()),
        at(
            "line_1",
            "[a-z]{256,270}".prop_map(|s| Some(Value::from(s))).boxed(),
        ),
        at("date_moved_in", malformed_date().prop_map(Some).boxed()),
        at("date_moved_out", malformed_date().prop_map(Some).boxed()),
    ];
    for &field in ADDRESS_TEXT {
        rules.push(at(field, wrong_type(Kind::Text).prop_map(Some).boxed()));
    }
    let moved_out_first = {
        let body = body.clone();
        (0..count, past_date(), 1i64..=3_650)
            .prop_map(move |(i, moved_in, days)| {
                let moved_out = moved_in - Duration::days(days);
                let broken = set_in_address(&body, i, "date_moved_in", Some(iso(moved_in).into()));
                let broken =
                    set_in_address(&broken, i, "date_moved_out", Some(iso(moved_out).into()));
                (broken, format!("addresses.{i}.date_moved_out"))
            })
            .boxed()
    };
    rules.push(moved_out_first);
    let not_an_object = {
        let body = body.clone();
        (
            0..count,
            select(vec![json!("1 High Street"), json!(1), json!(["LS1 1AA"])]),
        )
            .prop_map(move |(i, element)| {
                let mut broken = body.clone();
                broken["addresses"][i] = element;
                (broken, format!("addresses.{i}"))
            })
            .boxed()
    };
    rules.push(not_an_object);
    rules
}

/// Modest case counts keep the debug-build suite fast; `PROPTEST_CASES` raises them for a soak.
fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig::with_cases(cases)
}

fn broken_enquiry() -> impl Strategy<Value = Broken> {
    valid_enquiry().prop_flat_map(|body| Union::new(breakages(&body)))
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn every_enquiry_the_spec_allows_is_accepted(body in valid_enquiry()) {
        let enquiry = parse(&body);
        prop_assert!(enquiry.is_ok(), "{body:#}\nwas refused: {:?}", enquiry.err());
        let enquiry = enquiry.expect("checked above");
        let purpose = match enquiry.mortgage {
            Purpose::Purchase(_) => "purchase",
            Purpose::Remortgage(_) => "remortgage",
        };
        prop_assert_eq!(&body["mortgage_purpose"], purpose);
        prop_assert_eq!(
            enquiry.credit_issues.map(|issues| issues.len()),
            body["credit_issues"].as_array().filter(|_| body["has_credit_issues"] == true).map(Vec::len)
        );
        prop_assert_eq!(
            enquiry.addresses.map(|addresses| addresses.len()),
            body["addresses"].as_array().map(Vec::len)
        );
    }
}

proptest! {
    #![proptest_config(config(384))]

    #[test]
    fn a_valid_enquiry_broken_by_one_rule_is_refused_on_that_field_alone(
        (body, path) in broken_enquiry()
    ) {
        let errors = parse(&body).err().unwrap_or_default();
        let paths: Vec<&str> = errors.iter().map(|(p, _)| p.as_str()).collect();
        prop_assert_eq!(paths, vec![path.as_str()], "{:#}\ngave {:?}", body, errors);
        // A field of the body is named as words, a nested one by its whole path.
        let attribute = if path.contains('.') { path.clone() } else { path.replace('_', " ") };
        prop_assert!(errors[0].1.iter().all(|m| m.contains(&attribute)), "{:?}", errors);
    }
}
