//! Unit tests of request.rs.
use super::*;

fn g(pairs: &str, unions: &str, writable: Option<&str>) -> Given {
    let opt = |s: &str| (!s.is_empty()).then(|| s.as_bytes().to_vec());
    Given {
        pairs: opt(pairs),
        unions: opt(unions),
        writable: writable.map(|w| w.as_bytes().to_vec()),
        ..Given::default()
    }
}

#[test]
fn pairs_unions_writable() {
    let r = parse(&g(
        "/s/a.sqfs:/user-environment,/s/b.sqfs:/user-tools",
        "/x,/y:/user-environment/u;/p,/q:/user-tools/v",
        Some("2G"),
    ))
    .unwrap();
    let got: Vec<_> = r.mounts.iter().map(|m| m.describe()).collect();
    assert_eq!(
        got,
        [
            "/s/a.sqfs:/user-environment",
            "/s/b.sqfs:/user-tools",
            "/x,/y:/user-environment/u",
            "/p,/q:/user-tools/v"
        ]
    );
    assert!(r.mounts[2].union);
    assert_eq!(r.writable, Some(LayerSize::Bytes(2 << 30)));
    assert_eq!(
        parse(&g("/a:/m", "", Some(""))).unwrap().writable,
        Some(LayerSize::DEFAULT)
    );
    assert!(g("", "", None).is_empty());
}

#[test]
fn precedence() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| -> Result<Option<Vec<u8>>, String> {
            Ok(vars
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_bytes().to_vec()))
        }
    };
    let session = env(&[(
        "UENV_MOUNT_LIST",
        "/s/a.sqfs:/user-environment,/s/u1.sqfs:/u,/s/u2.sqfs:/u",
    )]);
    // Nothing given: the session's images, its union kept.
    let g = Given::default().resolve(session).unwrap();
    assert_eq!(g.source, Source::Session);
    let r = parse(&g).unwrap();
    let got: Vec<_> = r.mounts.iter().map(|m| (m.describe(), m.union)).collect();
    assert_eq!(
        got,
        [
            ("/s/a.sqfs:/user-environment".to_string(), false),
            ("/s/u1.sqfs,/s/u2.sqfs:/u".to_string(), true)
        ]
    );
    // A variable replaces it; an option replaces both; empty ones opt out.
    let both = env(&[
        ("UENV_MOUNT_LIST", "/s/a.sqfs:/user-environment"),
        ("SLURM_SQUASHFS", "/s/b.sqfs:/user-tools"),
    ]);
    let g = Given::default().resolve(both).unwrap();
    assert_eq!(
        (g.source, parse(&g).unwrap().mounts.len()),
        (Source::Variables, 1)
    );
    assert_eq!(
        parse(&g).unwrap().mounts[0].describe(),
        "/s/b.sqfs:/user-tools"
    );
    let opt = Given {
        pairs: Some(b"/s/c.sqfs:/user-environment".to_vec()),
        ..Given::default()
    }
    .resolve(both)
    .unwrap();
    assert_eq!(
        parse(&opt).unwrap().mounts[0].describe(),
        "/s/c.sqfs:/user-environment"
    );
    let out = Given {
        pairs: Some(Vec::new()),
        ..Given::default()
    }
    .resolve(session)
    .unwrap();
    assert!(out.is_empty() && out.source == Source::Options);
    let out = Given::default()
        .resolve(env(&[
            ("SLURM_SQUASHFS", ""),
            ("UENV_MOUNT_LIST", "/s/a.sqfs:/m"),
        ]))
        .unwrap();
    assert!(out.is_empty());
    assert!(parse(&Given {
        session: Some(b"/a:/m,broken".to_vec()),
        ..Given::default()
    })
    .unwrap_err()
    .to_string()
    .contains("$UENV_MOUNT_LIST"));
}

#[test]
fn binds_and_mutable_root_beside_the_images() {
    let env = |name: &str| -> Result<Option<Vec<u8>>, String> {
        Ok(match name {
            "UENV_MOUNT_LIST" => Some(b"/s/a.sqfs:/user-environment".to_vec()),
            "SLURM_SQUASHFS_BIND" => Some(b"/scratch/in:/user-tools/in".to_vec()),
            "SLURM_SQUASHFS_MUTABLE_ROOT" => Some(b"1".to_vec()),
            _ => None,
        })
    };
    // The variables give binds and -r; the session still gives images.
    let g = Given::default().resolve(env).unwrap();
    let r = parse(&g).unwrap();
    assert_eq!(g.source, Source::Session);
    assert_eq!(r.mounts.len(), 1);
    assert!(r.mutable_root);
    assert_eq!(r.binds[0].describe(), "/scratch/in:/user-tools/in");
    // The option replaces the variable.
    let g = Given {
        binds: Some(b"/a:/b,/c:/d".to_vec()),
        ..Given::default()
    }
    .resolve(env)
    .unwrap();
    assert_eq!(parse(&g).unwrap().binds.len(), 2);
    // Binds alone are something to mount.
    assert!(!Given {
        binds: Some(b"/a:/b".to_vec()),
        ..Given::default()
    }
    .is_empty());
    assert!(parse(&Given {
        binds: Some(b"/a".to_vec()),
        ..Given::default()
    })
    .unwrap_err()
    .to_string()
    .contains("--squashfs-bind"));
    let off = |name: &str| -> Result<Option<Vec<u8>>, String> {
        Ok((name == "SLURM_SQUASHFS_MUTABLE_ROOT").then(|| b"0".to_vec()))
    };
    assert!(Given::default()
        .resolve(off)
        .unwrap()
        .mutable_root
        .is_none());
}

#[test]
fn refused() {
    assert!(parse(&g("/a:/user-environment,", "", None))
        .unwrap_err()
        .to_string()
        .contains("not of the form"));
    assert!(parse(&g("/a:/b:/user-environment", "", None))
        .unwrap_err()
        .to_string()
        .contains("more than one ':'"));
    assert!(parse(&g("/a\n:/user-environment", "", None))
        .unwrap_err()
        .to_string()
        .contains("newline"));
    assert!(parse(&g("", "/a,,/b:/u", None))
        .unwrap_err()
        .to_string()
        .contains("--squashfs-union"));
    assert!(parse(&g("/a:/m", "", Some("1Q")))
        .unwrap_err()
        .to_string()
        .contains("--squashfs-writable"));
    assert!(parse(&g("", "", Some("1G")))
        .unwrap_err()
        .to_string()
        .contains("needs images"));
}
